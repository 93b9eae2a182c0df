"""An MCP server built with the Python SDK 1.x (`FastMCP`), run by the conformance matrix in a venv of
its own (tests/mcp_matrix/__init__.py makes it): never imported by Engram's tests, only started.

    python py_server.py PORT stateful|stateless

Stateful: sessions, SSE answers (FastMCP's defaults). Stateless: no session, JSON answers.
GET /stats tells what the server saw: sessions opened and still open, DELETEs, and its own time per
POST and DELETE (for bench.mcp_matrix).
"""

import json
import sys
import time

import uvicorn
from mcp.server.fastmcp import FastMCP

port, mode = int(sys.argv[1]), sys.argv[2]
stateless = mode == "stateless"
server = FastMCP("matrix-py1", stateless_http=stateless, json_response=stateless)


@server.tool()
def lookup_price(symbol: str) -> str:
    """The price of a ticker symbol."""
    return f"{symbol.upper()}: 182.3"


@server.tool()
def quote(symbol: str) -> dict:
    """A quote as structured content."""
    return {"symbol": symbol.upper(), "price": 182.3}


class Stats:
    """ASGI middleware: sessions the server handed out and those closed by DELETE, its own time; the
    sessions still open as the SDK's session manager holds them (the header alone can lie: 1.x names
    a session in its 400 to a request without one, and keeps none)."""

    def __init__(self, app):
        self.app = app
        self.open, self.opened, self.deletes, self.gets, self.spent_ms = set(), 0, 0, 0, []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/stats":
            body = json.dumps(
                {
                    "open": len(server.session_manager._server_instances),
                    "opened": self.opened,
                    "deletes": self.deletes,
                    "gets": self.gets,
                    "spentMs": self.spent_ms,
                }
            ).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": body})
        headers = dict(scope["headers"])
        self.gets += scope["method"] == "GET"
        asked = headers.get(b"mcp-session-id", b"").decode()
        started = time.perf_counter()

        async def watch(message):
            if message["type"] == "http.response.start":
                given = dict(message.get("headers", [])).get(b"mcp-session-id", b"").decode()
                if given and not asked:
                    self.open.add(given)
                    self.opened += 1
                if scope["method"] == "DELETE" and asked and message["status"] < 300:
                    self.deletes += 1
                    self.open.discard(asked)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if scope["method"] != "GET":  # the GET stream lasts as long as its session: not work done
                self.spent_ms.append((time.perf_counter() - started) * 1000)


uvicorn.run(Stats(server.streamable_http_app()), host="127.0.0.1", port=port, log_level="warning")
