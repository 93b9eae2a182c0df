"""`make bench` (Engram's MCP server): a tool call through POST /mcp against the same REST call,
on the local stack over loopback HTTP with an API key (offline model; moto for AWS).

`list_facts` (MCP, one client session, each call one POST) against `GET /api/me/facts` (httpx2,
one connection), in N interleaved pairs (which goes first alternates) after a warm-up, medians of
each and of the pairs' ratios; where the time goes (the use case itself, the server's MCP handling
around it, and the rest: HTTP, the emulated gateway, the client); and what the first /mcp request
of a container pays to import `engram.mcp_server.server` (the MCP SDK, starlette), in a fresh
interpreter. The aim: within 1.2x of REST.

    python -m bench.mcp_server [--pairs 100]
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--pairs", type=int, default=100)
    args = parser.parse_args()

    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from local.stack import start_stack

    load = os.getloadavg()
    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        url = handle.url.rstrip("/")
        dev = {"Authorization": "Bearer dev-bench", "content-type": "application/json"}
        with httpx2.Client(timeout=30) as http:
            key = http.post(f"{url}/api/me/api-keys", json={"name": "bench"}, headers=dev).json()["data"]["key"]
            for n in range(10):
                http.post(f"{url}/api/me/facts", json={"fact": f"I own {n} bicycles"}, headers=dev)
        auth = {"Authorization": f"Bearer {key}"}
        spent = {"use case": 0.0, "server.handle": 0.0}

        def timed(module: Any, name: str, bucket: str) -> None:
            inner = getattr(module, name)

            def wrapper(*a: Any, **kw: Any) -> Any:
                started = time.perf_counter()
                try:
                    return inner(*a, **kw)
                finally:
                    spent[bucket] += time.perf_counter() - started

            setattr(module, name, wrapper)

        async def pairs() -> tuple[list[float], list[float], dict[str, float], dict[str, float]]:
            rest: list[float] = []
            mcp: list[float] = []
            per_path = {"rest": dict.fromkeys(spent, 0.0), "mcp": dict.fromkeys(spent, 0.0)}
            async with (
                httpx2.AsyncClient(headers=auth, timeout=30) as rest_http,
                httpx2.AsyncClient(headers=auth, timeout=30) as client_http,
                Client(streamable_http_client(f"{url}/mcp", http_client=client_http)) as client,
            ):

                async def one_rest() -> float:
                    started = time.perf_counter()
                    assert (await rest_http.get(f"{url}/api/me/facts")).status_code == 200
                    return time.perf_counter() - started

                async def one_mcp() -> float:
                    started = time.perf_counter()
                    result: Any = await client.call_tool("list_facts", {})
                    assert not result.is_error
                    return time.perf_counter() - started

                for _ in range(5):  # warm-up: both paths loaded
                    await one_rest()
                    await one_mcp()
                # The modules the stack loaded (its own copies of the layer): time the use case and the server.
                timed(sys.modules["engram.facts.service"], "list_facts", "use case")
                timed(sys.modules["engram.mcp_server.server"], "handle", "server.handle")
                for i in range(args.pairs):
                    for path in ("rest", "mcp") if i % 2 == 0 else ("mcp", "rest"):
                        before = dict(spent)
                        (rest if path == "rest" else mcp).append(await (one_rest() if path == "rest" else one_mcp()))
                        for bucket in spent:
                            per_path[path][bucket] += spent[bucket] - before[bucket]
            return rest, mcp, per_path["rest"], per_path["mcp"]

        rest, mcp, rest_parts, mcp_parts = anyio.run(pairs)
    finally:
        handle.stop()
    n = args.pairs
    rest_ms, mcp_ms = statistics.median(rest) * 1000, statistics.median(mcp) * 1000
    ratio = statistics.median(m / r for m, r in zip(mcp, rest, strict=True))
    print(f"mcp server: the first /mcp request of a container imports the SDK: {_import_ms():.0f} ms (median of 5)")
    print(f"mcp server: load average {load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (the cores are shared)")
    print(
        f"mcp server: list_facts {mcp_ms:.1f} ms vs GET /api/me/facts {rest_ms:.1f} ms "
        f"(medians of {n} interleaved pairs; median ratio {ratio:.2f}x, aim 1.2x)"
    )
    use_rest, use_mcp = rest_parts["use case"] / n * 1000, mcp_parts["use case"] / n * 1000
    server = mcp_parts["server.handle"] / n * 1000
    print(
        f"mcp server: where a call's time goes (means): REST {sum(rest) / n * 1000:.1f} ms = use case {use_rest:.1f} + the rest "
        f"{sum(rest) / n * 1000 - use_rest:.1f}; MCP {sum(mcp) / n * 1000:.1f} ms = use case {use_mcp:.1f} + the server's MCP "
        f"handling {server - use_mcp:.1f} (the SDK's transport, JSON-RPC, validation, result) + the rest "
        f"{sum(mcp) / n * 1000 - server:.1f} (HTTP, gateway, route, the client SDK)"
    )


if __name__ == "__main__":
    main()
