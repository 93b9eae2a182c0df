"""The turn's deadline, applied to every AWS call made on its behalf.

API Gateway answers 503 at 30 s and leaves the function running, so a sync turn (25 s budget)
must answer before then even when DynamoDB, S3 or SQS stall. botocore's own timeouts are per
attempt (connect 3 s, read 10 s, 4 attempts: a stalled call could take 50 s), and a client cannot
take a timeout per call. So while a deadline is set (`within`), each call of a `BoundedClient`
runs on a small pool and the caller waits at most the time left; past it the call raises
`OutOfTime` and the turn fails cleanly. The abandoned call finishes on its own: every write it
could still apply is conditional (the commit holds the lease, the transcript names its run), so a
late write cannot overturn the recorded failure.

The deadline is a context variable: `ContextThreadPool` carries it into the turn's parallel reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Any

from engram.kernel.errors import TurnTimeout
from engram.kernel.observability import logger

_deadline: ContextVar[float | None] = ContextVar("engram_aws_deadline", default=None)
_pool: ThreadPoolExecutor | None = None


class OutOfTime(TurnTimeout):
    """An AWS call did not answer within the turn's budget. The call itself may still land."""

    def __init__(self, message: str, late: Future[Any] | None = None):
        super().__init__(message)
        self.late = late

    def if_it_lands(self, undo: Callable[[], None]) -> None:
        """Runs `undo` if the abandoned call succeeds after all (a lease it took is freed at
        once instead of blocking the session until it expires)."""
        if self.late is None:
            return

        def landed(call: Future[Any]) -> None:
            if call.exception() is None:
                try:
                    undo()
                except Exception:
                    logger.exception("could not undo a call that landed after its deadline")

        self.late.add_done_callback(landed)


@contextmanager
def within(deadline: float | None) -> Iterator[None]:
    """AWS calls in this context (and in ContextThreadPool tasks it starts) end by `deadline`
    (time.monotonic()); None lifts the bound."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def _calls() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        # Stalled calls hold a thread until botocore gives up; 16 is plenty for one container.
        _pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="engram-aws")
    return _pool


def bounded(operation: str, call: Callable[..., Any], **params: object) -> object:
    left = remaining()
    if left is None:
        return call(**params)
    if left <= 0:
        raise OutOfTime(f"no time was left for {operation} within the turn's budget")
    future = _calls().submit(call, **params)
    try:
        return future.result(timeout=left)
    except FuturesTimeout:
        raise OutOfTime(f"{operation} did not answer within the turn's budget", late=future) from None


class BoundedClient:
    """A boto3 client whose API calls respect the current deadline (attributes pass through)."""

    def __init__(self, client: object):
        self._client = client

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr) or name in ("get_paginator", "can_paginate", "get_waiter", "close"):
            return attr

        def call(**params: object) -> object:
            return bounded(name, attr, **params)

        return call


class ContextThreadPool(ThreadPoolExecutor):
    """A pool whose tasks run in the submitter's context (so they keep its deadline)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        context = copy_context()
        return super().submit(context.run, fn, *args, **kwargs)
