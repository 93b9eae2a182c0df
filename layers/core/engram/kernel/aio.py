"""Async code from synchronous code: the core's one sync-over-async runner, used by the MCP client
(connections.mcp_client) and the MCP server (mcp_server.server). Imported only by them: anyio is
not a cost the api's other routes pay."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable

import anyio


def run_sync[T](main: Callable[[], Awaitable[T]]) -> T:
    """`anyio.run(main)` on this thread; on a thread of its own, with this thread's context variables,
    when this thread already runs an event loop (never in Lambda: an embedding async app, an
    in-process test harness, the sync Playwright API of the browser tests). Its exception is raised
    again here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(main)
    results: list[T] = []
    errors: list[BaseException] = []

    def run_here() -> None:
        try:
            results.append(anyio.run(main))
        except BaseException as err:  # raised again on the caller's thread
            errors.append(err)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(run_here,), name="engram-aio")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]
