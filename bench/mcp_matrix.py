"""MCP conformance matrix (issue 32, TL7): Engram's overhead per tool call over the server's own time,
for each server kind of the matrix, through a whole HTTP chat turn on the local stack.

Each kind is a real server process on loopback (tests/mcp_matrix: Python SDK 1.30 stateful/SSE and
stateless/JSON, TypeScript SDK 1.32.2 stateful/SSE and stateless/JSON, Python SDK 1.9.4 speaking
only 2025-03-26) plus the Python SDK 2.x sample server (local/sample_mcp.py, in this process). For
each: TURNS turns calling the built-in `get_current_time` (the same two model rounds, a tool call
recorded, no server) and TURNS turns calling the server's `lookup_price`, in pairs, each on a fresh
session of the same agent (so history does not grow), timed over HTTP. The overhead of a call is its
turn's time minus the built-in tool's turn just before it minus the server's
own time for the turn's requests (the server measures it, GET /stats; its GET stream, open as long
as the session, is not counted). "The call alone": the call's durationMs in the run record (session
taken or opened, tools/call) minus the server's time. It includes the session's
opening, the call, and its close (DELETE on stateful servers) at the turn's end. Median and p95;
aim: median under 15 ms.

    python -m bench.mcp_matrix
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")

from bench.memory_sections import ROOT  # noqa: F401  (puts the core on sys.path, a local AWS environment)

TURNS = 25


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _measure(url: str, kind: str, server_url: str, server_ms: Callable[[], float]) -> tuple[list[float], float, list[float]]:
    from tests.e2e.test_local_stack_http import http

    status, created = http(url, "POST", "/api/connections", body={"name": kind, "url": server_url})
    assert status == 201, created
    conn = created["data"]["id"]
    status, tested = http(url, "POST", f"/api/connections/{conn}/test")
    assert tested["data"]["ok"], tested
    status, agent = http(url, "POST", "/api/agents", body={"name": f"Bench {kind}", "tools": [{"connectionId": conn}]})
    agent_id = agent["data"]["id"]

    def turn(i: int, message: str) -> tuple[float, float, dict[str, object]]:
        status, session = http(url, "POST", f"/api/agents/{agent_id}/sessions", body={"title": f"bench {i}"})
        assert status == 201, session
        path = f"/api/agents/{agent_id}/sessions/{session['data']['id']}/messages"
        before = server_ms()
        started = time.perf_counter()
        status, body = http(url, "POST", path, body={"message": message})
        total = (time.perf_counter() - started) * 1000
        assert status == 200, body
        return total, server_ms() - before, body["data"]

    turn(0, "use lookup_price for sol")  # warm: the era of the server is learnt, the code paths loaded
    plain, overheads, in_process = [], [], []
    for i in range(TURNS):  # in pairs, so the machine's drift falls on both sides
        without, _, plain_data = turn(1000 + i, "use get_current_time for now")
        assert plain_data["toolCalls"], plain_data  # the same two model rounds, a built-in tool's call
        total, server, data = turn(i + 1, "use lookup_price for sol")
        calls = data["toolCalls"]
        assert isinstance(calls, list) and calls and not calls[0].get("error"), calls
        plain.append(without)
        overheads.append(total - without - server)
        in_process.append(float(calls[0]["durationMs"]) - server)
    return overheads, statistics.median(plain), in_process


def main() -> int:
    from bench.mcp_tools import ServerClock
    from local.sample_mcp import build_server, serve_app
    from local.stack import start_stack
    from tests.mcp_matrix import KINDS, start

    stack = start_stack(port=0, model_provider="offline", retry_delay=1)
    clock = ServerClock(build_server().streamable_http_app(json_response=True, stateless_http=True))
    sample = serve_app(clock)
    rows = []
    try:
        url = stack.url.rstrip("/")
        found, baseline, inside = _measure(url, "py2-stateless", sample.url, lambda: sum(clock.spent) * 1000)
        rows.append(("py2-stateless", "Python SDK 2.x MCPServer, stateless, JSON answers", found, baseline, inside))
        for kind, what in KINDS.items():
            server = start(kind)
            try:
                found, baseline, inside = _measure(url, kind, server.url, lambda s=server: float(sum(s.stats()["spentMs"])))
            finally:
                server.stop()
            rows.append((kind, what, found, baseline, inside))
    finally:
        sample.stop()
        stack.stop()
    print(f"== MCP conformance matrix: Engram's overhead per call over the server's own time, HTTP turns ({TURNS} each)")
    worst = 0.0
    for kind, what, found, baseline, inside in rows:
        median = statistics.median(found)
        worst = max(worst, median)
        print(
            f"{kind:15} HTTP turn: median {median:6.1f} ms  p95 {_percentile(found, 0.95):6.1f} ms;"
            f" the call alone: median {statistics.median(inside):5.1f} ms"
            f"  (turn with the built-in tool: {baseline:.1f} ms)  {what}"
        )
    print("aim: median under 15 ms for every kind")
    return 0 if worst < 15 else 1


if __name__ == "__main__":
    raise SystemExit(main())
