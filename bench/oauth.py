"""OAuth connections (TL9): what refreshing a grant costs a turn.

A real authorization server (oidc-provider, tests/oauth) and two real MCP servers that accept only
its audience-bound tokens, on loopback, in front of the local stack (offline model, moto). One
connection's access tokens live 10 minutes, the other's 2 s, so every turn of its agent (1.2 s
apart) finds the token due and refreshes it first (token endpoint, KMS seal, conditional write).

Printed: the refresh itself (median, p95, timed around `engram.connections.oauth.refresh` in the
chat function), and a whole HTTP chat turn that calls one tool with a fresh token and with a
refresh, each the median of TURNS turns.

    python -m bench.oauth
"""

from __future__ import annotations

import os
import statistics
import time
import urllib.request
from collections.abc import Callable
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")

from bench.memory_sections import ROOT  # noqa: F401  # its import puts the core on sys.path

TURNS = 15


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    from local.stack import start_stack
    from tests.e2e.test_local_stack_http import http
    from tests.oauth.fixture import AuthorizationServer, free_port, protected_mcp_server

    ports = [free_port(), free_port()]
    resources = [f"http://127.0.0.1:{p}/mcp" for p in ports]
    issuer = AuthorizationServer.start(
        resources=[
            {"resource": resources[0], "scope": "tools", "ttl": 600},
            {"resource": resources[1], "scope": "tools", "ttl": 2},
        ]
    )
    servers = [protected_mcp_server(issuer.issuer, p) for p in ports]
    live = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        url = live.url.rstrip("/")
        agents = []
        for name, resource in zip(("steady", "short"), resources, strict=True):
            status, created = http(url, "POST", "/api/connections", body={"name": name, "url": resource, "oauth": {}})
            conn = created["data"]["id"]
            started = http(url, "POST", f"/api/connections/{conn}/oauth/start")[1]["data"]
            callback = issuer.sign_in(started["authorizationUrl"], stop_at=url + "/api/connections/oauth/callback")
            with urllib.request.urlopen(callback, timeout=30) as answer:
                assert answer.status == 200
            status, agent = http(url, "POST", "/api/agents", body={"name": name, "tools": [{"connectionId": conn}]})
            agents.append(agent["data"]["id"])

        def turn(agent_id: str) -> float:
            """One turn in a session of its own (a long session's summary would change the prompt)."""
            session = http(url, "POST", f"/api/agents/{agent_id}/sessions", body={})[1]["data"]["id"]
            started = time.perf_counter()
            status, body = http(
                url, "POST", f"/api/agents/{agent_id}/sessions/{session}/messages", body={"message": "use lookup_price for SOL"}
            )
            elapsed = (time.perf_counter() - started) * 1000
            assert status == 200 and body["data"]["toolCalls"] and "182.3" in body["data"]["toolCalls"][0]["result"], body
            return elapsed

        turn(agents[0])  # warm: imports, the tool lists
        turn(agents[1])
        refreshes = _time_refreshes()
        steady = [turn(agents[0]) for _ in range(TURNS)]
        short = []
        for _ in range(TURNS):
            time.sleep(1.2)
            short.append(turn(agents[1]))
        timed = refreshes()
        print("OAuth token refresh (TL9), loopback authorization server (oidc-provider 9.13.3), local stack")
        print(
            f"  refresh itself:       median {statistics.median(timed):6.1f} ms  p95 {_percentile(timed, 0.95):6.1f} ms  (n={len(timed)})"
        )
        print(f"  turn, fresh token:    median {statistics.median(steady):6.1f} ms  (n={TURNS})")
        print(f"  turn, with a refresh: median {statistics.median(short):6.1f} ms  (n={TURNS})")
        print(f"  server-side refreshes seen: {len(issuer.events('refresh'))}")
    finally:
        live.stop()
        for server in servers:
            server.stop()
        issuer.stop()
    return 0


def _time_refreshes() -> Callable[[], list[float]]:
    """Wraps the chat function's `refresh` with a timer; the timings so far."""
    import engram.connections.oauth as oauth

    timings: list[float] = []
    original = oauth.refresh

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            timings.append((time.perf_counter() - started) * 1000)

    oauth.refresh = timed  # type: ignore[assignment]
    return lambda: list(timings)


if __name__ == "__main__":
    raise SystemExit(main())
