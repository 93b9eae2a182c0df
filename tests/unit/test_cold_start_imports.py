"""The api function must never pay for the anthropic SDK (~1.5 s of imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, sys
sys.path[:0] = [{layer!r}]
spec = importlib.util.spec_from_file_location("handler", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(sorted(m for m in ("anthropic", "httpx2", "moto") if m in sys.modules))
"""


def _loaded(function: str) -> str:
    code = PROBE.format(layer=str(ROOT / "layers" / "core"), path=str(ROOT / "functions" / function / "app.py"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"})
    return out.stdout.strip()


def test_api_handler_does_not_import_the_model_sdk():
    assert _loaded("api") == "[]"


def test_chat_handler_defers_the_model_sdk_until_a_model_is_called():
    assert _loaded("chat") == "[]"


def test_extract_handler_defers_the_model_sdk_until_a_model_is_called():
    assert _loaded("extract") == "[]"
