"""kernel.lazy_packages: powertools' catch-all package inits run their imports on first use, and
every name those packages have is still there (issue 33, item 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engram.kernel.lazy_packages import PACKAGES, reexports

CORE = Path(__file__).resolve().parents[2] / "layers" / "core"

# A fresh interpreter: the test session may have imported these packages already.
PROBE = """
import sys
import engram
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, CORSConfig, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
print(sorted(m for m in ("asyncio", "zipfile", "aws_lambda_powertools.event_handler.appsync",
                         "aws_lambda_powertools.event_handler.bedrock_agent") if m in sys.modules))
import aws_lambda_powertools.event_handler as handler
import aws_lambda_powertools.utilities.data_classes as events
from aws_lambda_powertools.event_handler import api_gateway
print(Response is api_gateway.Response, content_types.APPLICATION_JSON)
# Every exported name, read from the package, is the submodule's own object.
for package in (handler, events):
    names = package.__all__  # a name not re-exported runs the real __init__
    print(len(names), all(getattr(package, n) is getattr(sys.modules[getattr(package, n).__module__], n) for n in names if hasattr(getattr(package, n), "__module__")))
from aws_lambda_powertools.event_handler import *  # noqa: F403
print("AppSyncResolver" in dir(), "__getattr__" in vars(handler))
"""


def test_the_api_resolver_loads_without_the_other_resolvers_and_every_name_stays():
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(CORE), "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "True application/json"
    assert out[2].split()[1] == out[3].split()[1] == "True" and int(out[2].split()[0]) > 15 and int(out[3].split()[0]) > 30
    assert out[4] == "True False"  # the real __init__ ran once; the lazy hook is gone


def test_a_package_init_that_does_more_than_reexport_is_imported_as_it_is():
    assert reexports('"""doc"""\nfrom .a import B as C\nfrom p.x import D\n__all__ = ["C", "D"]\n', "p") == {
        "C": ("p.a", "B"),
        "D": ("p.x", "D"),
    }
    assert reexports("from .a import B\nregister()\n", "p") is None  # a side effect: not deferred
    assert reexports("from os import path\n", "p") is None  # a name from outside the package
    assert reexports("from .a import B\nVERSION = 2\n", "p") is None


def test_the_deferred_packages_still_only_reexport():
    # If powertools adds anything else to these inits, they are imported eagerly again (safe but
    # slower): this test says so instead of the cold-start figure quietly growing.
    import importlib.util

    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin
        assert reexports(Path(spec.origin).read_text(encoding="utf-8"), name), name
