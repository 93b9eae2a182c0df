"""A tool server's health (TL8) as a rule: which outcomes count, how the cool-down grows, when a
success is worth a write, and one outcome per server for a batch of calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from engram.connections import health as health_book
from engram.connections.mcp_client import CallResult
from engram.connections.mcp_http import McpFailure
from engram.connections.models import COOL_MAX_S, Connection, Health, HealthError, cool_down_s, utc_now
from engram.connections.tools import McpToolSet
from engram.kernel.settings import Settings

UNREACHABLE = HealthError(code="unreachable", message="the tool server could not be reached")


def test_the_cool_down_starts_at_the_second_failure_and_doubles_up_to_ten_minutes():
    assert [cool_down_s(n) for n in range(1, 9)] == [0, 30, 60, 120, 240, 480, 600, 600]
    assert cool_down_s(10_000) == COOL_MAX_S


def test_failures_in_a_row_make_a_server_degraded_then_down_and_a_success_heals_it():
    now = utc_now()
    once = Health().failed(UNREACHABLE, now)
    assert once.state == "degraded" and once.retry_after is None and not once.cooling(once.last_error_at or "")
    twice = once.failed(UNREACHABLE, now)
    assert twice.state == "down" and twice.cooling((now + timedelta(seconds=29)).isoformat())
    assert not twice.cooling((now + timedelta(seconds=31)).isoformat())
    assert twice.failed(UNREACHABLE, now).retry_after > twice.retry_after  # type: ignore[operator]
    healed = twice.succeeded(now)
    assert healed.state == "healthy" and healed.consecutive_failures == 0 and healed.last_error == UNREACHABLE


@pytest.mark.parametrize("code", ["unauthorized", "invalid_tool_schema", "egress_refused", "too_large", "protocol_error"])
def test_a_problem_that_is_not_the_server_being_down_is_not_counted(code):
    assert health_book.after(Health(), HealthError(code=code, message="x")) is None


def test_a_success_is_written_when_it_changes_something_or_the_last_one_is_old():
    assert health_book.after(Health(), None) is not None  # unknown -> healthy
    fresh = Health().succeeded(utc_now())
    assert health_book.after(fresh, None) is None
    old = Health().succeeded(utc_now() - timedelta(seconds=health_book.SUCCESS_REFRESH_S + 5))
    assert health_book.after(old, None) is not None


@dataclass
class _Rows:
    """The connection rows' health writes, kept in memory."""

    written: list[tuple[str, Health, int]] = field(default_factory=list)
    refuse: bool = False

    def record_health(self, tenant: str, connection_id: str, health: Health, *, seen: int) -> bool:
        if self.refuse:
            raise ConnectionError("the table is unreachable")
        self.written.append((connection_id, health, seen))
        return True


@dataclass
class _Deps:
    connections: _Rows
    settings: Settings = field(default_factory=Settings)
    secret_box: object = None
    history: object = None


def _connection(connection_id: str) -> Connection:
    at = "2026-01-01T00:00:00.000Z"
    return Connection(id=connection_id, created_at=at, updated_at=at, name=connection_id, url="https://x.example/mcp")


def _result(code: str | None) -> CallResult:
    return CallResult(ok=code is None, failure=McpFailure(code, "m") if code else None)


def test_a_batch_tells_each_server_one_outcome():
    rows = _Rows()
    toolset = McpToolSet(_Deps(rows), "t")  # type: ignore[arg-type]
    a, b, c = _connection("conn_a"), _connection("conn_b"), _connection("conn_c")
    toolset._note_health(
        [
            (a, _result("timeout")),
            (a, _result(None)),  # one call reached it: a success
            (b, _result("unauthorized")),
            (b, _result("server_error")),  # the counted failure wins over one that does not count
            (c, _result("unauthorized")),  # nothing counted: nothing written
        ]
    )
    written = {connection_id: (health.state, seen) for connection_id, health, seen in rows.written}
    assert written == {"conn_a": ("healthy", 0), "conn_b": ("degraded", 0)}
    assert toolset.health["conn_b"].last_error == HealthError(code="server_error", message="m")
    # A second batch goes on from what this turn knows, even when the write failed.
    rows.refuse = True
    toolset._note_health([(b, _result("unreachable"))])
    assert toolset.health["conn_b"].state == "down"


def test_a_listing_that_ends_long_past_its_bound_was_frozen_and_is_not_counted():
    import time

    from engram.connections.source import FROZEN_SLACK_S, refresh_tools

    rows = _Rows()

    def timed_out(*args: object, **kwargs: object) -> list[object]:
        raise TimeoutError

    connection = _connection("conn_a")
    thawed = time.monotonic() - FROZEN_SLACK_S - 1  # its bound passed long ago
    failure, health = refresh_tools(_Deps(rows), "t", connection, None, list_tools=timed_out, deadline=thawed)  # type: ignore[arg-type]
    assert failure == HealthError(code="timeout", message="the tool server did not answer in time")
    assert health == connection.health and rows.written == []
    failure, health = refresh_tools(_Deps(rows), "t", connection, None, list_tools=timed_out, deadline=time.monotonic())  # type: ignore[arg-type]
    assert health.state == "degraded" and [w[0] for w in rows.written] == ["conn_a"]
