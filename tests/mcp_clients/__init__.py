"""The real MCP clients of the client conformance test (tests/e2e/test_mcp_conformance.py), made
ready on first use: the TypeScript SDK's client and mcp-remote from package-lock.json (`npm ci`
into tests/mcp_clients/node_modules), the Python SDK 1.x client in a venv of its own
(.cache/mcp-clients-py1-venv, requirements-py1.txt). Each is remade when its pins change."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY1_VENV = ROOT / ".cache" / "mcp-clients-py1-venv"


def _sha(*files: Path) -> str:
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()


def node_clients() -> Path:
    """tests/mcp_clients with its node_modules installed exactly as package-lock.json pins them."""
    stamp = HERE / "node_modules" / ".lock-sha256"
    want = _sha(HERE / "package.json", HERE / "package-lock.json")
    if not stamp.exists() or stamp.read_text() != want:
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed for the MCP client conformance test (node 20+)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True, timeout=600)
        stamp.write_text(want)
    return HERE


def py1_python() -> Path:
    """The python of the venv holding the Python SDK 1.x client."""
    stamp = PY1_VENV / ".requirements-sha256"
    requirements = HERE / "requirements-py1.txt"
    want = _sha(requirements)
    if not stamp.exists() or stamp.read_text() != want:
        shutil.rmtree(PY1_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(PY1_VENV)], check=True)
        pip = [str(PY1_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(requirements)], check=True, timeout=600)
        stamp.write_text(want)
    return PY1_VENV / "bin" / "python"
