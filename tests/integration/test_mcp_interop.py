"""MCP interoperability and bounds (TL7, TL8) against real servers on loopback: answers counted in
decoded bytes (a gzip and a deflate bomb), a tool whose output schema the server changed, tool names
that collide once made safe, and a turn's sessions reused across its rounds and closed at its end."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest

from engram.kernel.ids import tenant_key
from local.sample_mcp import Running, serve_app
from tests.integration.test_mcp_tools import acting_agent
from tests.mcp_servers import faulty_server, lifespans

BOMB = 30_000_000  # decoded bytes; a few tens of KB on the wire


class ReportV1(TypedDict):
    count: int


class ReportV2(TypedDict):
    total: int


def changing_server() -> Any:
    """A server whose `report` tool changes its output schema when the test says so."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("engram-changing")

    def report_v1(topic: str) -> ReportV1:
        """A count about a topic."""
        return {"count": 3}

    server.add_tool(report_v1, name="report")
    return server


def change_report(server: Any) -> None:
    def report_v2(topic: str) -> ReportV2:
        """A total about a topic (the new shape)."""
        return {"total": 7}

    server.remove_tool("report")
    server.add_tool(report_v2, name="report")


def colliding_server() -> Any:
    """Tools whose names meet once made safe (`.` becomes `_`) or cut to 64 characters."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("engram-colliding")
    for name in ("price.lookup", "price_lookup"):
        server.add_tool(lambda symbol: symbol, name=name, description="a price")
    return server


def long_names_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("engram-long-names")
    stem = "fetch_the_quarterly_report_for_the_region_and_the_product_line"
    for name in (f"{stem}_north", f"{stem}_south"):
        server.add_tool(lambda region: region, name=name, description="a report")
    return server


@dataclass
class Servers:
    running: Running
    changing: Any

    def url(self, name: str) -> str:
        return f"{self.running.url.removesuffix('/mcp')}/{name}/mcp"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    from starlette.applications import Starlette
    from starlette.middleware.gzip import GZipMiddleware
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    changing = changing_server()
    apps = {
        name: server.streamable_http_app(json_response=True, stateless_http=True, streamable_http_path="/mcp")
        for name, server in (
            ("faulty", faulty_server()),
            ("changing", changing),
            ("colliding", colliding_server()),
            ("long", long_names_server()),
        )
    }
    bomb = zlib.compress(b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "pad": "' + b"x" * BOMB + b'"}}', 9)

    async def deflate_bomb(request: Any) -> Response:
        """Any request answered with 30 MB of JSON-RPC deflated to a few tens of KB."""
        return Response(bomb, media_type="application/json", headers={"content-encoding": "deflate"})

    routes = [
        Route("/deflate/mcp", deflate_bomb, methods=["POST"]),
        # every answer gzipped, even the smallest: what a server behind a compressing proxy sends
        Mount("/gzip", app=GZipMiddleware(apps["faulty"], minimum_size=1)),
        *(Mount(f"/{name}", app=app) for name, app in apps.items()),
    ]
    running = serve_app(Starlette(routes=routes, lifespan=lifespans(apps)))
    yield Servers(running, changing)
    running.stop()


def connect(stack: Any, servers: Servers, name: str, path: str) -> dict[str, Any]:
    r = stack.call("POST", "/api/connections", body={"name": name, "url": servers.url(path), "timeoutSeconds": 10})
    assert r.status == 201, r.body
    return r.data


def test_gzip_answers_are_read_and_a_gzip_bomb_is_refused_as_too_large(stack, servers):
    conn = connect(stack, servers, "zipped", "gzip")
    tested = stack.call("POST", f"/api/connections/{conn['id']}/test").data
    assert tested["ok"] is True and "huge" in [t["name"] for t in tested["tools"]]
    agent = acting_agent(stack, conn)

    small = stack.say(agent["id"], "use echo with hello").data["toolCalls"][0]
    assert small.get("error") is None and "hello" in small["result"]

    r = stack.say(agent["id"], f"use huge with {BOMB}")
    assert r.status == 200, r.body
    (call,) = r.data["toolCalls"]
    assert call["isError"] is True and call["error"] == "too_large", call
    assert "decoded" in call["result"] and "fullResultKept" not in call
    limit = stack.deps.settings.tool_response_max_bytes
    assert call["bytes"] <= limit + 1  # reading stopped one byte past the limit: 30 MB never inflated


def test_a_deflate_bomb_fails_the_connection_test_as_too_large(stack, servers):
    conn = connect(stack, servers, "deflated", "deflate")
    tested = stack.call("POST", f"/api/connections/{conn['id']}/test").data
    assert tested["ok"] is False and tested["error"]["code"] == "too_large", tested


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("colliding", ("price.lookup", "price_lookup")),
        (
            "long",
            (
                "fetch_the_quarterly_report_for_the_region_and_the_product_line_north",
                "fetch_the_quarterly_report_for_the_region_and_the_product_line_south",
            ),
        ),
    ],
)
def test_tool_names_that_collide_fail_the_connection_test_naming_both(stack, servers, path, names):
    conn = connect(stack, servers, "clash", path)
    tested = stack.call("POST", f"/api/connections/{conn['id']}/test").data
    assert tested["ok"] is False and tested["error"]["code"] == "tool_name_collision", tested
    assert all(repr(name) in tested["error"]["message"] for name in names), tested
    # nothing half-listed: no tool of the server is offered with one of the pair hidden
    assert stack.call("GET", f"/api/connections/{conn['id']}").data["tools"] is None


def test_a_tool_whose_output_schema_changed_is_listed_again_once_and_its_result_taken(stack, servers):
    conn = connect(stack, servers, "reports", "changing")
    assert stack.call("POST", f"/api/connections/{conn['id']}/test").data["ok"] is True
    agent = acting_agent(stack, conn)
    assert "3" in stack.say(agent["id"], "use report with sales").data["toolCalls"][0]["result"]

    change_report(servers.changing)  # the server now answers {"total": 7}, its schema says so
    (call,) = stack.say(agent["id"], "use report with sales").data["toolCalls"]
    assert call.get("error") is None and '"total": 7' in call["result"], call
    cached = stack.deps.connections.tools(tenant_key("alice"), [conn["id"]])[conn["id"]]
    (report,) = [t for t in cached.tools if t.name == "report"]
    assert report.output_schema is not None and "total" in report.output_schema["properties"]
    # the next turn checks against the new schema: no listing, no error
    assert stack.say(agent["id"], "use report with sales").data["toolCalls"][0].get("error") is None


def _one_round(sessions: Any, url: str, *symbols: str) -> list[Any]:
    """One model round of a turn: lookup_price for each symbol, at once, through the turn's sessions."""
    from engram.connections.mcp_client import Call, Endpoint, call_tools

    endpoint = Endpoint(url, timeout_s=10)
    calls = [Call(endpoint, "lookup_price", {"symbol": symbol}) for symbol in symbols]
    return call_tools(calls, sessions.policy, deadline=time.monotonic() + 20, max_bytes=2_000_000, sessions=sessions)


def _turn_sessions() -> Any:
    from engram.connections.egress import EgressPolicy
    from engram.connections.mcp_client import Sessions

    return Sessions(EgressPolicy.of("local", True), None, 2_000_000)


def test_a_turns_sessions_are_reused_across_its_rounds_and_closed_at_its_end():
    from tests.mcp_matrix import start

    server = start("ts-stateful")
    try:
        sessions = _turn_sessions()
        for symbol in ("sol", "eth"):  # two model rounds of one turn
            (result,) = _one_round(sessions, server.url, symbol)
            assert result.ok and symbol.upper() in result.content[0]["text"]
        assert server.stats()["opened"] == 1 and server.stats()["open"] == 1  # one session, still open
        # a round with two calls at once: the idle session for one, a new one for the other
        both = _one_round(sessions, server.url, "a", "b")
        assert all(r.ok for r in both) and server.stats()["opened"] == 2
        sessions.close()  # the turn ends
        seen = server.closed(deletes=2)
        assert seen["open"] == 0 and seen["deletes"] == 2, seen
        # no standing GET stream was opened beside the calls (Engram takes no server-initiated messages)
        assert seen["gets"] == 0, seen
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["py1-stateful", "ts-stateful"])
def test_a_session_the_server_forgot_is_replaced_and_the_call_made_once(kind):
    """The server restarts between two rounds of a turn: the reused session is refused before the call
    runs (the Python SDK answers 404, the TypeScript SDK's example server 400 with an id-less JSON-RPC
    error "No valid session ID provided"), so the call goes out once more in a new session."""
    from tests.mcp_matrix import start

    server = start(kind)
    sessions = _turn_sessions()
    try:
        assert _one_round(sessions, server.url, "sol")[0].ok
        server.stop()
        server = start(kind, server.port)  # the same address, no memory of the session
        (again,) = _one_round(sessions, server.url, "eth")
        assert again.ok and "ETH" in again.content[0]["text"], again.failure
        assert server.stats()["opened"] == 1  # one new session, the call made in it once
        sessions.close()
        assert server.closed(deletes=1)["open"] == 0
    finally:
        server.stop()
