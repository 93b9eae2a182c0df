"""MCP tool calls (issue 27): Engram's overhead per call over the server's own time, and the tool
list cache over 30 turns.

A real MCP server (local/sample_mcp.py, the official SDK's MCPServer over Streamable HTTP) runs on
loopback behind a timing middleware that adds up the time the server spends on each HTTP request.
1. Overhead: 200 single calls of `lookup_price` through the project's own tool set
   (`McpToolSet.call_many`: the egress guard, a session per call, result bounding and recording),
   each timed end to end; the overhead is that time minus the server's time for the same call's
   requests (the handshake and the call). Median and p95; aim: under 15 ms on loopback. Also the
   HTTP requests per call.
2. Tool list cache: 30 chat turns (offline model; every third asks for a tool) of an agent with the
   connection, on moto; how many turns listed the server's tools (`tools/list`) and the hit rate.

Prompt-prefix reuse with 20 MCP tools: `python -m bench.prompt_cache` prints it (its second run).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")

from bench.memory_sections import ROOT  # its import puts the core on sys.path and sets a local AWS environment

CALLS = 200
TURNS = 30


class ServerClock:
    """ASGI middleware: the server's own time per HTTP request, and the JSON-RPC methods it saw."""

    def __init__(self, app: Any):
        self.app = app
        self.spent: list[float] = []
        self.methods: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        body = b""

        async def receive_and_read() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        try:
            await self.app(scope, receive_and_read, send)
        finally:
            self.spent.append(time.perf_counter() - started)
            for method in (b"tools/list", b"tools/call", b"initialize", b"server/discover"):
                if method in body:
                    self.methods.append(method.decode())

    def mark(self) -> tuple[int, int]:
        return len(self.spent), len(self.methods)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    from moto import mock_aws

    from engram.agents.models import Agent, AgentTool
    from engram.connections.models import Connection, DiscoveredTool
    from engram.connections.tools import McpToolSet, _Entry
    from engram.conversations.chat import run_chat_turn
    from engram.conversations.models import Session
    from engram.engine.tools import ToolContext
    from engram.kernel.ids import tenant_key
    from engram.kernel.model import now_iso
    from engram.kernel.settings import Settings
    from engram.roots import chat
    from local.resources import create_resources
    from local.sample_mcp import build_server, serve_app
    from local.template import load_template

    clock = ServerClock(build_server().streamable_http_app(json_response=True, stateless_http=True))
    running = serve_app(clock)
    try:
        with mock_aws():
            resources = create_resources(load_template(ROOT / "template.yaml"))
            settings = Settings.from_env(resources.env())
            deps = chat.build(settings)
            t = tenant_key("bench")
            now = now_iso()
            connection = Connection(id="conn_bench", created_at=now, updated_at=now, name="market", url=running.url)
            deps.connections.create(t, connection, None, limit=10)
            agent = Agent(
                id="ag_bench",
                created_at=now,
                updated_at=now,
                name="Trader",
                model="offline",
                tools=[AgentTool(connection_id=connection.id)],
            )
            dashboard = Session(id="dashboard", agent_id=agent.id, created_at=now, updated_at=now)
            deps.agents.create(
                t, agent, webhook_secret="unused", with_items=[deps.sessions.item(t, dashboard)], max_agents=10, max_scheduled=10
            )

            # 1. overhead per call
            tool = DiscoveredTool(name="lookup_price", input_schema={"type": "object"})
            toolset = McpToolSet(deps, t, {"mcp__market__lookup_price": _Entry(connection, tool, None)})
            ctx = ToolContext(tenant=t, agent=agent, session_id="dashboard", run_id="run_bench")
            use = {"type": "tool_use", "id": "toolu_bench", "name": "mcp__market__lookup_price", "input": {"symbol": "BTC"}}
            toolset.call_many([use], ctx, time.monotonic() + 30)  # warm: imports, the first connection
            toolset.close()
            totals, overheads, requests = [], [], []
            for _ in range(CALLS):
                before, _ = clock.mark()
                started = time.perf_counter()
                (outcome,) = toolset.call_many([use], ctx, time.monotonic() + 30)
                toolset.close()  # the turn's end: its sessions closed, as after every turn
                total = time.perf_counter() - started
                assert not outcome.is_error, outcome.content
                server = sum(clock.spent[before:])
                totals.append(total * 1000)
                overheads.append((total - server) * 1000)
                requests.append(len(clock.spent) - before)
            # 2. the tool list cache over 30 turns
            listed_turns = 0
            for i in range(TURNS):
                seen = clock.methods.count("tools/list")
                message = "use lookup_price for ETH" if i % 3 == 0 else f"note {i}: nothing to look up"
                run_chat_turn(deps, t, agent.id, "dashboard", message)
                listed_turns += clock.methods.count("tools/list") > seen
    finally:
        running.stop()
    median, p95 = statistics.median(overheads), _percentile(overheads, 0.95)
    hit_rate = 100.0 * (TURNS - listed_turns) / TURNS
    print(f"== MCP tool calls on loopback ({CALLS} calls of lookup_price through McpToolSet.call_many)")
    print(
        f"end to end: median {statistics.median(totals):.1f} ms, p95 {_percentile(totals, 0.95):.1f} ms; "
        f"HTTP requests per call: {statistics.median(requests):.0f} (handshake and call, one session per call)"
    )
    print(f"Engram's overhead over the server's own time: median {median:.1f} ms, p95 {p95:.1f} ms (aim: median under 15 ms)")
    print(
        f"tool list cache over {TURNS} turns: {listed_turns} turn(s) listed the server's tools, "
        f"hit rate {hit_rate:.1f}% (TOOL_LIST_TTL_SECONDS {settings.tool_list_ttl_s})"
    )
    return 0 if median < 15 else 1


if __name__ == "__main__":
    raise SystemExit(main())
