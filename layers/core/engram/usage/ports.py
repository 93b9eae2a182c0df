"""Port of the usage ledger."""

from __future__ import annotations

from typing import Protocol

from engram.usage.models import UsageRow


class UsageLedger(Protocol):
    """One row per model call that cost something: by tenant, by agent and session."""

    def item(self, tenant: str, row: UsageRow) -> dict[str, object]: ...

    def put(self, tenant: str, row: UsageRow) -> None: ...

    def page(
        self, tenant: str, *, agent_id: str | None, session_key: str | None, limit: int, token: str | None
    ) -> tuple[list[UsageRow], str | None]: ...

    def all_rows(self, tenant: str) -> list[dict[str, object]]:
        """Every usage row of the tenant, as stored minus its keys (account export)."""
        ...

    def delete_all(self, tenant: str) -> int: ...
