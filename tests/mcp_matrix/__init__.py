"""The conformance matrix (TL7): MCP servers built with the SDKs people run, each a real process on
loopback. The Python SDK 1.x and its 2025-03-26-only release live in venvs of their own under
.cache/ (made here, from the pinned requirements beside this file); the TypeScript SDK comes from
the npm registry with ts/package-lock.json (`npm ci`). `make test` prepares both
(`python -m tests.mcp_matrix`), and the tests prepare them again if they are missing.

    server = start("ts-stateful")   # server.url, server.stats(), server.stop()
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / ".cache"
TS = HERE / "ts"
VENVS = {"mcp1": HERE / "requirements-mcp1.txt", "mcp-2025-03-26": HERE / "requirements-mcp-2025-03-26.txt"}

# What each server kind is. The 2025-03-26 server runs stateless: 1.9.4's stateful session manager
# stops serving after any session's DELETE (its message router dies on the closed stream; fixed in
# 1.10), so a client that closes its sessions, as the spec asks, would take it down.
KINDS: dict[str, str] = {
    "py1-stateful": "Python SDK 1.30 FastMCP, stateful, SSE answers",
    "py1-stateless": "Python SDK 1.30 FastMCP, stateless, JSON answers",
    "ts-stateful": "TypeScript SDK 1.32.2 McpServer, stateful, SSE answers",
    "ts-stateless": "TypeScript SDK 1.32.2 McpServer, stateless, JSON answers",
    "py-2025-03-26": "Python SDK 1.9.4 FastMCP (protocol 2025-03-26 only, initialize handshake), stateless, JSON",
}


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes never build the same thing at once
        yield


def _digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()


def venv_python(name: str) -> Path:
    """The python of `.cache/<name>-venv`, made (or remade when its requirements changed)."""
    requirements = VENVS[name]
    venv = CACHE / f"{name}-venv"
    stamp = venv / ".requirements-sha256"
    with _locked(name):
        if not stamp.exists() or stamp.read_text() != _digest(requirements):
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, "-r", str(requirements)], check=True)
            stamp.write_text(_digest(requirements))
    return venv / "bin" / "python"


def node_modules() -> Path:
    """ts/node_modules as ts/package-lock.json pins it (`npm ci`, again when the lockfile changed)."""
    lock = TS / "package-lock.json"
    stamp = TS / "node_modules" / ".lock-sha256"
    with _locked("npm"):
        if not stamp.exists() or stamp.read_text() != _digest(lock):
            npm = shutil.which("npm")
            assert npm, "node and npm are needed for the TypeScript SDK's MCP server (tests/mcp_matrix/ts)"
            subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=TS, check=True)
            stamp.write_text(_digest(lock))
    return TS / "node_modules"


def prepare() -> None:
    for name in VENVS:
        venv_python(name)
    node_modules()


def _command(kind: str, port: int) -> list[str]:
    if kind.startswith("ts-"):
        node_modules()
        node = shutil.which("node")
        assert node, "node is needed for the TypeScript SDK's MCP server"
        return [node, str(TS / "server.mjs"), str(port), kind.removeprefix("ts-")]
    if kind == "py-2025-03-26":
        return [str(venv_python("mcp-2025-03-26")), str(HERE / "py_server.py"), str(port), "stateless"]
    return [str(venv_python("mcp1")), str(HERE / "py_server.py"), str(port), kind.removeprefix("py1-")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MatrixServer:
    kind: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stats(self) -> dict[str, Any]:
        """What the server saw: `open` sessions, `opened`, `deletes`, `gets` (GET streams), `spentMs` per request."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
        return found

    def closed(self, deletes: int = 0, within_s: float = 10.0) -> dict[str, Any]:
        """`stats()` once no session is open and `deletes` DELETEs came (or `within_s` passed):
        Engram closes a turn's sessions in the background, the turn's answer does not wait for them."""
        until = time.monotonic() + within_s
        while True:
            seen = self.stats()
            if (seen["open"] == 0 and seen["deletes"] >= deletes) or time.monotonic() > until:
                return seen
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(kind: str, port: int | None = None) -> MatrixServer:
    """The server of that kind on `port` (a free one by default), once it answers."""
    port = port or _free_port()
    command = _command(kind, port)
    log = CACHE / f"{kind}-{port}.log"
    with open(log, "wb") as out:  # a file, not a pipe nobody reads (a full pipe would stall the server)
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = MatrixServer(kind, port, process)
    until = time.monotonic() + 60
    while time.monotonic() < until:
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            server.stats()
            return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"the {kind} server did not start within 60 s")
