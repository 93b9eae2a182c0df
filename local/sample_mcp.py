"""A small MCP server with deterministic tools, for trying agents that act without a key.

`make dev` starts it beside the stack (http://127.0.0.1:3001/mcp); register it as a connection and
give an agent its tools, then say "use lookup_price for BTC" (the offline model calls it). Two
tools over fixed data: `lookup_price` (a made-up market) and `search_tickets` (a made-up tracker).
It is the official SDK's `MCPServer` over Streamable HTTP, stateless with JSON answers, the way a
team would run its own.

    python -m local.sample_mcp [--port 3001]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

PRICES = {
    "BTC": {"symbol": "BTC", "name": "Bitcoin", "price": 97250.5, "currency": "USD", "change24h": -1.2},
    "ETH": {"symbol": "ETH", "name": "Ether", "price": 3412.75, "currency": "USD", "change24h": 0.8},
    "SOL": {"symbol": "SOL", "name": "Solana", "price": 182.3, "currency": "USD", "change24h": 3.4},
    "AAPL": {"symbol": "AAPL", "name": "Apple", "price": 231.4, "currency": "USD", "change24h": 0.3},
}
TICKETS = [
    {"id": "ENG-101", "title": "Login fails with SSO after password reset", "status": "open", "assignee": "mira"},
    {"id": "ENG-102", "title": "Export times out for large accounts", "status": "in_progress", "assignee": "tom"},
    {"id": "ENG-103", "title": "Dark mode contrast on the usage chart", "status": "open", "assignee": None},
    {"id": "ENG-104", "title": "Login page shows stale error after retry", "status": "closed", "assignee": "mira"},
    {"id": "OPS-7", "title": "Rotate the webhook signing secret", "status": "open", "assignee": "ana"},
]


def build_server(**options: Any) -> Any:
    """The sample server; `options` go to `MCPServer` (e.g. `auth` and `token_verifier`)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("engram-sample", instructions="Deterministic sample tools: a price lookup and a ticket search.", **options)

    @server.tool()
    def lookup_price(symbol: str) -> dict[str, Any]:
        """The current price of a market symbol (BTC, ETH, SOL, AAPL) in USD, with its 24 h change in percent."""
        found = PRICES.get(symbol.strip().upper())
        if found is None:
            raise ValueError(f"unknown symbol {symbol!r}; known: {', '.join(sorted(PRICES))}")
        return found

    @server.tool()
    def search_tickets(query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Tickets whose title contains every word of the query (case-insensitive), newest first."""
        words = query.lower().split()
        hits = [t for t in reversed(TICKETS) if all(w in t["title"].lower() for w in words)]
        return hits[: max(1, min(limit, 20))]

    return server


@dataclass
class Running:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


def serve_app(app: Any, *, host: str = "127.0.0.1", port: int = 0, path: str = "/mcp") -> Running:
    """Serves an ASGI app with uvicorn in a daemon thread; returns once it listens."""
    import uvicorn

    if port == 0:
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"mcp-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise OSError(f"the MCP server could not listen on {host}:{port}")
        time.sleep(0.01)
    return Running(url=f"http://{host}:{port}{path}", server=server, thread=thread)


def start(port: int = 0, host: str = "127.0.0.1") -> Running:
    app = build_server().streamable_http_app(json_response=True, stateless_http=True)
    return serve_app(app, host=host, port=port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=3001)
    args = parser.parse_args(argv)
    running = start(args.port)
    print(f"sample MCP server on {running.url} (tools: lookup_price, search_tickets)", flush=True)
    try:
        while running.thread.is_alive():
            time.sleep(0.5)
    except KeyboardInterrupt:
        running.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
