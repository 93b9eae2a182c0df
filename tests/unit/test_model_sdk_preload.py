"""The functions that call the model import the anthropic SDK during init, not in their first
request (issue 13, item 2); the api function never imports it, and with the offline model no
function does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib.util, sys
sys.path[:0] = [{task_root!r}, {layer!r}]
spec = importlib.util.spec_from_file_location("app", {task_root!r} + "/app.py")
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print("anthropic" in sys.modules)
"""


def _imports_sdk(function: str, provider: str) -> bool:
    code = PROBE.format(task_root=str(ROOT / "functions" / function), layer=str(ROOT / "layers" / "core"))
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "MODEL_PROVIDER": provider,
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return out.split()[-1] == "True"


@pytest.mark.parametrize("function", ["chat", "heartbeat", "extract"])
def test_model_functions_import_the_sdk_at_init_with_claude_only(function):
    assert _imports_sdk(function, "anthropic") is True
    assert _imports_sdk(function, "offline") is False


def test_the_api_function_never_imports_it():
    assert _imports_sdk("api", "anthropic") is False
