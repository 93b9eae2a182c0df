"""Port of run memory: what the agents of one run hand each other."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from engram.run_memory.models import RunMemoryEntry


class RunMemories(Protocol):
    """Entries of one run's shared memory, keyed by name."""

    def put(self, tenant: str, agent_id: str, run_id: str, entry: RunMemoryEntry) -> RunMemoryEntry:
        """One UpdateItem: sets the entry's fields, keeps the createdAt of an earlier write of the
        same key; returns the entry as stored."""
        ...

    def put_many(self, tenant: str, agent_id: str, run_id: str, entries: Iterable[RunMemoryEntry]) -> None:
        """BatchWriteItem of whole entries (the caller's inputs at run start), retrying unprocessed
        items with backoff. Entries are written as given, createdAt included."""
        ...

    def load(self, tenant: str, agent_id: str, run_id: str) -> list[RunMemoryEntry]:
        """Every entry of the run (all pages), in createdAt order."""
        ...

    def page(
        self, tenant: str, agent_id: str, run_id: str, *, limit: int, token: str | None, max_bytes: int
    ) -> tuple[list[RunMemoryEntry], str | None]: ...

    def agent_entries(self, tenant: str, agent_id: str) -> list[tuple[str, RunMemoryEntry]]:
        """(runId, entry) of every run memory held in the agent's partition (account export)."""
        ...
