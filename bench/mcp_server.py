"""`make bench` (Engram's MCP server): a tool call through POST /mcp against the same REST call,
on the local stack over loopback HTTP with an API key (offline model; moto for AWS).

`list_facts` (MCP, one client session, each call one POST) against `GET /api/me/facts` (httpx2,
one connection), median of N each after a warm-up; and what the first /mcp request of a container
pays to import `engram.mcp_server.server` (the MCP SDK, starlette), in a fresh interpreter. The
aim: within 1.2x of REST.

    python -m bench.mcp_server [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.memory_sections import ROOT  # its import puts the core on sys.path and sets a local AWS environment

_PROBE = """
import sys, time
sys.path[:0] = [{layer!r}]
import engram.api.http, engram.wiring.stores  # what the api function has loaded already
start = time.perf_counter()
import engram.mcp_server.server
print(time.perf_counter() - start)
"""


def _import_ms() -> float:
    code = _PROBE.format(layer=str(ROOT / "layers" / "core"))
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "true"}
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout)
        for _ in range(5)
    ]
    return statistics.median(runs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()

    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from local.stack import start_stack

    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        url = handle.url.rstrip("/")
        dev = {"Authorization": "Bearer dev-bench", "content-type": "application/json"}
        with httpx2.Client(timeout=30) as http:
            key = http.post(f"{url}/api/me/api-keys", json={"name": "bench"}, headers=dev).json()["data"]["key"]
            for n in range(10):
                http.post(f"{url}/api/me/facts", json={"fact": f"I own {n} bicycles"}, headers=dev)
            auth = {"Authorization": f"Bearer {key}"}
            rest: list[float] = []
            for _ in range(args.calls + 5):
                started = time.perf_counter()
                assert http.get(f"{url}/api/me/facts", headers=auth).status_code == 200
                rest.append(time.perf_counter() - started)

        async def tool_calls() -> list[float]:
            times: list[float] = []
            async with (
                httpx2.AsyncClient(headers=auth, timeout=30) as client_http,
                Client(streamable_http_client(f"{url}/mcp", http_client=client_http)) as client,
            ):
                for _ in range(args.calls + 5):
                    started = time.perf_counter()
                    result: Any = await client.call_tool("list_facts", {})
                    times.append(time.perf_counter() - started)
                    assert not result.is_error
            return times

        mcp = anyio.run(tool_calls)
    finally:
        handle.stop()
    rest_ms = statistics.median(rest[5:]) * 1000
    mcp_ms = statistics.median(mcp[5:]) * 1000
    print(f"mcp server: the first /mcp request of a container imports the SDK: {_import_ms():.0f} ms (median of 5)")
    print(
        f"mcp server: list_facts {mcp_ms:.1f} ms vs GET /api/me/facts {rest_ms:.1f} ms "
        f"(median of {args.calls}; {mcp_ms / rest_ms:.2f}x, aim 1.2x)"
    )


if __name__ == "__main__":
    main()
