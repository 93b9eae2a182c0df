"""A function's handler module imported in a fresh interpreter, as Lambda's init does (its code
folder and the layer on the path, a clean environment): what it imported, what it built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PROBE = """
import importlib.util, sys
sys.path[:0] = [{task_root!r}, {layer!r}]
spec = importlib.util.spec_from_file_location("app", {task_root!r} + "/app.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
{tail}
"""


def import_handler(function: str, tail: str, **env: str) -> list[str]:
    """Imports functions/<function>/app.py, runs `tail` (Python that prints; `module` is the app)
    and returns the printed words. `env` is the whole environment besides PATH and the region."""
    code = _PROBE.format(task_root=str(ROOT / "functions" / function), layer=str(ROOT / "layers" / "core"), tail=tail)
    environment = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", **env}
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    return done.stdout.split()
