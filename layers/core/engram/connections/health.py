"""A server's health, remembered across turns (TL8): every listing and call that reaches (or fails
to reach) a connection's server tells its row, so the next turn of any agent, in any function,
knows it is down without waiting for it again.

The write is one conditional UpdateItem on the connection's row (already read by the turn), on
the failure count the turn read: when another turn changed it first, its word stands. A write that
fails is logged and counted, never the turn's failure: the health is advice, the next outcome
writes it again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from engram.connections.models import COUNTED_FAILURES, Connection, Health, HealthError, utc_now
from engram.connections.ports import Connections
from engram.kernel.observability import MetricUnit, logger, metric_by

# A success is written when it changes the state, or when the stored one is older than this (so
# `lastSuccessAt` stays roughly current without a write per call).
SUCCESS_REFRESH_S = 300
# After a failure, a turn waits this long for the server's listing (which goes on in the
# background to its own bound): a server that failed lately costs a turn at most about this.
RETRY_WAIT_S = 1.0

Write = Callable[[Callable[[], None]], None]


def write_now(job: Callable[[], None]) -> None:
    job()


def counts(code: str) -> bool:
    return code in COUNTED_FAILURES


def after(seen: Health, failure: HealthError | None) -> Health | None:
    """The health after an outcome (None: nothing to write). `failure` None is a success."""
    now = utc_now()
    if failure is not None:
        return seen.failed(failure, now) if counts(failure.code) else None
    if seen.consecutive_failures == 0 and seen.last_success_at is not None:
        stored = seen.last_success_at
        fresh_until = now.timestamp() - SUCCESS_REFRESH_S
        if _epoch(stored) > fresh_until:
            return None
    return seen.succeeded(now)


def note(
    connections: Connections,
    tenant: str,
    connection: Connection,
    seen: Health,
    failure: HealthError | None,
    write: Write = write_now,
) -> Health:
    """Records an outcome on the connection's row (through `write`: now, or on the turn's pool);
    returns the health the caller should go on with."""
    changed = after(seen, failure)
    if changed is None:
        return seen
    if changed.state != seen.state:
        logger.info(
            "a tool server's health changed",
            extra={
                "connection": connection.id,
                "from": seen.state,
                "to": changed.state,
                "error": failure.code if failure else None,
            },
        )
        metric_by(
            "ToolServerDown" if changed.state == "down" else "ToolServerHealthChanged",
            MetricUnit.Count,
            1,
            Connection=connection.name,
        )

    def job() -> None:
        try:
            connections.record_health(tenant, connection.id, changed, seen=seen.consecutive_failures)
        except Exception as err:  # advice only: the next outcome writes it again
            logger.warning("a tool server's health could not be stored", extra={"connection": connection.id, "error": repr(err)})
            metric_by("ToolHealthWriteFailed", MetricUnit.Count, 1, Connection=connection.name)

    write(job)
    return changed


def unavailable_reason(health: Health) -> str:
    """What the model reads of a server that is skipped: why, and until when."""
    error = health.last_error
    why = f"{error.code}: {error.message}" if error else "it failed"
    return (
        f"its server failed {health.consecutive_failures} times in a row (last: {why}); "
        f"Engram does not contact it before {health.retry_after}"
    )


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
