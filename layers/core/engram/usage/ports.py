"""Port of the usage ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Protocol

from engram.usage.limits import Spend
from engram.usage.models import Limits, UsageRow


class UsageLedger(Protocol):
    """One row per model call that cost something: by tenant, by agent and session."""

    def item(self, tenant: str, row: UsageRow) -> dict[str, object]: ...

    def put(self, tenant: str, row: UsageRow) -> None: ...

    def totals_ops(self, tenant: str, rows: Sequence[UsageRow], *, kind: str, tool_calls: int = 0) -> list[dict[str, object]]:
        """The ADD updates of the usage totals, for the transaction that writes `rows`."""
        ...

    def record(self, tenant: str, row: UsageRow, *, kind: str) -> bool:
        """A job's row and its totals, once (a row already stored is not counted again)."""
        ...

    def spend(self, tenant: str, agent_id: str, day: date) -> Spend:
        """What the person and the agent spent this day and month, and the person's limits (one read)."""
        ...

    def limits(self, tenant: str) -> Limits | None: ...

    def set_limits(self, tenant: str, limits: Limits | None) -> None: ...

    def totals(
        self, tenant: str, start: date, end: date, *, agent_id: str | None = None, months: bool = False
    ) -> list[dict[str, object]]:
        """The totals items of the days (or months) from `start` to `end`, oldest first."""
        ...

    def all_totals(self, tenant: str) -> list[dict[str, object]]: ...

    def page(
        self, tenant: str, *, agent_id: str | None, session_key: str | None, limit: int, token: str | None
    ) -> tuple[list[UsageRow], str | None]: ...

    def all_rows(self, tenant: str) -> list[dict[str, object]]:
        """Every usage row of the tenant, as stored minus its keys (account export)."""
        ...

    def delete_all(self, tenant: str) -> int: ...


class Limited(Protocol):
    @property
    def limits(self) -> Limits | None: ...


class LimitedAgents(Protocol):
    """The agents' store as far as usage reads it: an agent's spending limits (agents.ports.Agents
    is one; usage knows no more of agents)."""

    def get(self, tenant: str, agent_id: str) -> Limited | None: ...
