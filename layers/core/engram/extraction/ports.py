"""Port of the extraction job's storage: its claim on a run and its one-transaction commit."""

from __future__ import annotations

from typing import Protocol

from engram.extraction.models import Claim, RowWrite
from engram.memory.models import Memory
from engram.usage.models import UsageRow


class ExtractionClaims(Protocol):
    """The marker a job claims per run, the rows it reads, and its commit."""

    def claim(self, tenant: str, agent_id: str, run_id: str, *, attempt_id: str, lease_s: float) -> Claim: ...

    def release(self, tenant: str, agent_id: str, run_id: str, claim: Claim) -> None:
        """After a failure: the next delivery may claim at once instead of waiting out the lease."""
        ...

    def live_rows(self, tenant: str, scope: str, owner_id: str, *, limit: int, session_id: str) -> list[Memory]:
        """The owner's live rows, best first (pinned > importance > recent): one bounded Query."""
        ...

    def get_rows(self, tenant: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        ...

    def commit(
        self,
        tenant: str,
        agent_id: str,
        run_id: str,
        claim: Claim,
        *,
        outcome: dict[str, object],
        usage: UsageRow | None,
        rows: list[RowWrite],
        memory_limit: int,
    ) -> list[RowWrite]:
        """Marker `done` + usage row + memory rows, all or nothing; new rows beyond their owner's
        `memory_limit` are left out (and returned), never failing the commit."""
        ...

    def put_usage(self, tenant: str, usage: UsageRow) -> None:
        """A model call whose results could not be committed still cost money: record it alone."""
        ...
