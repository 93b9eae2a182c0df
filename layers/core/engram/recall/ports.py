"""Port of the conversation archive conversation_search reads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol


class Archive(Protocol):
    """Archived messages of an agent's sessions, written with the turn that produced them."""

    @property
    def name(self) -> str:
        """The table's name: warm search caches are keyed by it."""
        ...

    def items_for_turn(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        run_id: str,
        messages: Sequence[Mapping[str, object]],
        created_at: str,
        *,
        speakers: dict[str, str] | None = None,
        archived_at: str | None = None,
    ) -> list[dict[str, object]]:
        """Plain attribute dicts (keys included) for the text messages of one turn, ready for ``serialize``.

        ``speakers`` maps a role to a label (e.g. a person's name); ``archived_at`` (default
        ``created_at``) orders GSI1 and should be the write time, so backfills pass "now"."""
        ...

    def put_many(self, tenant: str, agent_id: str, items: Sequence[Mapping[str, object]]) -> int:
        """BatchWriteItem in batches of 25, retrying unprocessed items with backoff. Returns the count."""
        ...

    def load_since(self, tenant: str, agent_id: str, after: str | None, *, limit: int | None = None) -> list[dict[str, object]]:
        """Archive items (and tombstones) whose GSI1SK sorts after ``after``, oldest first.

        ``after`` is an archivedAt prefix (e.g. an ISO timestamp); None reads everything.
        ``limit`` keeps only the newest ``limit`` items (read newest first, returned oldest first)."""
        ...

    def agent_items(self, tenant: str, agent_id: str, *, page_size: int = 500) -> Iterator[dict[str, object]]:
        """Every archived message of an agent (all its sessions), one page in memory at a time."""
        ...

    def session_items(self, tenant: str, agent_id: str, session_id: str) -> list[dict[str, object]]:
        """A session's archive in time order (strongly consistent: it reads the base table)."""
        ...

    def delete_session(self, tenant: str, agent_id: str, session_id: str) -> int:
        """Deletes one session's archive and leaves a tombstone for warm caches. Returns the count."""
        ...
