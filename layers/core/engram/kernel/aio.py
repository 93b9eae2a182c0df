"""Async code from synchronous code: the core's one sync-over-async runner (`run_sync`, a loop for one
piece of work; `background()`, a loop for the process that keeps work between calls), used by the
MCP client (connections.mcp_client) and the MCP server (mcp_server.server). Imported only by them:
anyio is not a cost the api's other routes pay."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup
from anyio.from_thread import BlockingPortal


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


class BackgroundLoop:
    """An event loop on a daemon thread of its own for the life of the process, with a task group
    for work that outlives one call from synchronous code (e.g. the MCP sessions a turn keeps open
    between its model rounds). Started once, by the first `background()`: starting a loop per use
    costs a thread and a loop each time."""

    def __init__(self) -> None:
        ready = threading.Event()
        self.portal: BlockingPortal | None = None
        self.group: TaskGroup | None = None

        async def main() -> None:
            async with BlockingPortal() as portal, anyio.create_task_group() as group:
                self.portal, self.group = portal, group
                ready.set()
                await portal.sleep_until_stopped()

        threading.Thread(target=anyio.run, args=(main,), name="engram-aio-background", daemon=True).start()
        ready.wait()

    def call[T](self, main: Callable[[], Awaitable[T]]) -> T:
        """`main()` on the loop, from synchronous code (never from the loop's own thread)."""
        assert self.portal is not None
        result: T = self.portal.call(main)
        return result


_BACKGROUND: list[BackgroundLoop] = []
_STARTING = threading.Lock()


def background() -> BackgroundLoop:
    """The process's background loop, started on first use."""
    if not _BACKGROUND:
        with _STARTING:
            if not _BACKGROUND:
                _BACKGROUND.append(BackgroundLoop())
    return _BACKGROUND[0]
