"""Cold starts: the api function never pays for the anthropic SDK (~1.5 s of imports), the MCP SDK,
the turn engine, the agent's tools or the search index; the others import the model SDK only with a
model call and the MCP SDK only with a turn or test that lists or calls MCP tools."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

from tests.handler_probe import import_handler

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, sys
sys.path[:0] = [{layer!r}]
spec = importlib.util.spec_from_file_location("handler", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(sorted(m for m in ("anthropic", "httpx2", "moto", "mcp", "httpcore2", "starlette", "uvicorn", "opentelemetry.sdk") if m in sys.modules))
print(sorted(m for m in sys.modules if m.startswith(("engram.engine", "engram.recall.index", "engram.recall.search", "engram.roots"))
             or m.endswith((".tools", ".policy", ".section"))))
print(sorted(m for m in ("engram.aws.kms", "engram.runs.schedules", "engram.runs.expressions",
                         "engram.run_memory.store", "engram.secrets.matcher") if m in sys.modules))
print(" ".join(sorted(m for m in sys.modules if m.startswith("engram"))))
"""


def _loaded(function: str) -> str:
    """The third-party modules of interest the handler's import loaded (first line of the probe)."""
    return _probe(function)[0]


def _probe(function: str) -> list[str]:
    return _probes()[function]


@functools.cache
def _probes() -> dict[str, list[str]]:
    """Each handler imported in a fresh interpreter; the three run side by side, once per session."""
    running = {}
    for function in ("api", "chat", "extract"):
        code = PROBE.format(layer=str(ROOT / "layers" / "core"), path=str(ROOT / "functions" / function / "app.py"))
        running[function] = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"},
        )
    out = {}
    for function, process in running.items():
        stdout, stderr = process.communicate()
        assert process.returncode == 0, stderr
        out[function] = stdout.strip().splitlines()
    return out


def test_api_handler_does_not_import_the_model_sdk():
    assert _loaded("api") == "[]"


def test_chat_handler_defers_the_model_sdk_until_a_model_is_called():
    assert _loaded("chat") == "[]"


def test_extract_handler_defers_the_model_sdk_until_a_model_is_called():
    assert _loaded("extract") == "[]"


def test_api_handler_loads_no_engine_tools_or_search_index():
    loaded = _probe("api")[1]
    # Of the roots, the api function loads its own; of the engine, nothing.
    assert loaded == "['engram.roots', 'engram.roots.api', 'engram.roots.function']"


def test_api_handler_defers_what_only_a_few_requests_use():
    # The scheduler and its expression parser, the KMS box, the run scratchpad and the secret
    # detector's rules load with the first request that needs them (issue 33, item 7).
    assert _probe("api")[2] == "[]"


def test_api_handler_imports_no_router_service_or_repository_before_a_request():
    # Each router, with its models, services and repositories, is imported with the first request
    # under its prefixes (engram.api.http.RouterSpec; the stores' repositories with their first
    # use): the import pays for none of the 16 (issue 33, item 7).
    loaded = _probe("api")[3].split()
    kinds = (".routes", ".service", ".repository", ".routes_models", ".models")
    assert [m for m in loaded if m.endswith(kinds)] == []


def test_api_handler_imports_only_the_powertools_resolver_it_uses():
    # powertools' event_handler and data_classes packages import every resolver and event class
    # (AppSync with asyncio, CodePipeline with zipfile...); kernel.lazy_packages imports those on
    # first use. urllib.request (http.client, email) comes with the first JWT, botocore's errors with
    # the first AWS call (issue 33, item 7).
    # As deployed by default (TraceAwsCalls false): the X-Ray SDK, when on, imports asyncio itself.
    names = ("asyncio", "urllib.request", "http.client", "aws_lambda_powertools.event_handler.appsync", "botocore.exceptions")
    loaded = import_handler("api", f"print([m for m in {names!r} if m in sys.modules])", POWERTOOLS_TRACE_DISABLED="true")
    assert loaded == ["[]"]


def test_the_api_functions_models_evaluate_their_annotations_at_once():
    # pydantic evaluates a string annotation (`from __future__ import annotations`) with eval()
    # while it builds each model class: ~10 ms of the api function's import for its 46 models.
    # Its models load with its routers, on the requests that use them: all of them, here.
    core = ROOT / "layers" / "core"
    tail = "module.app.include_all(); print(*sorted(m for m in sys.modules if m.startswith('engram')))"
    loaded = [core / (name.replace(".", "/") + ".py") for name in import_handler("api", tail)]
    models = [p for p in loaded if p.name in ("models.py", "model.py", "settings.py")]
    assert len(models) > 10
    postponed = re.compile(r"^from __future__ import annotations", re.M)
    assert [str(p.relative_to(core)) for p in models if postponed.search(p.read_text())] == []
