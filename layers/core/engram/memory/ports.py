"""Port of long-term memories (user, workspace and agent scope)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from engram.agents.ports import Agents, Workspaces
from engram.kernel.settings import Settings
from engram.memory.models import Memory, MemoryEntry


class Memories(Protocol):
    """Memories of one owner (user, workspace, agent), ranked for the prompt."""

    def item(self, tenant: str, m: Memory, owner_id: str) -> dict[str, object]: ...

    def put(self, tenant: str, m: Memory, owner_id: str, *, expect_updated_at: str | None = None) -> None:
        """With `expect_updated_at` (read-modify-write), refused if the row changed since it was read."""
        ...

    def get(self, tenant: str, scope: str, owner_id: str, mid: str) -> Memory | None: ...

    def get_many(self, tenant: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        ...

    def create(self, tenant: str, m: Memory, owner_id: str, *, limit: int) -> None:
        """A new row, within the owner's `limit` of rows (QuotaExceeded)."""
        ...

    def all(self, tenant: str, scope: str, owner_id: str) -> list[Memory]: ...

    def top(self, tenant: str, scope: str, owner_id: str, *, limit: int, session_id: str | None) -> list[Memory]:
        """The owner's live rows in injection order (pinned > importance > recent), at most `limit`."""
        ...

    def top_entries(
        self,
        tenant: str,
        scope: str,
        owner_id: str,
        *,
        limit: int,
        session_id: str | None,
        page: int = 50,
        wanted: Callable[[list[MemoryEntry]], int] | None = None,
    ) -> list[MemoryEntry]:
        """`top`'s rows with only what the prompt's sections show of them (MemoryEntry); with
        `wanted`, read page by page while it asks for more rows (how many)."""
        ...

    def recent_learnings(self, tenant: str, agent_id: str, *, limit: int) -> list[Memory]:
        """An agent's `limit` newest active director learnings, newest first (one bounded Query)."""
        ...

    def delete(self, tenant: str, scope: str, owner_id: str, mid: str) -> None: ...

    def delete_owner(self, tenant: str, scope: str, owner_id: str) -> int:
        """Removes every memory row of an agent or workspace (the agent cascade covers agents)."""
        ...

    def delete_session_memories(self, tenant: str, agent_id: str, session_id: str) -> int:
        """Conversation-category rows are bound to their session and go with it."""
        ...


class MemoryStores(Protocol):
    """What a memory write reaches (wiring.Stores provides it): the limits, the owners whose
    existence it checks, the rows."""

    @property
    def settings(self) -> Settings: ...

    @property
    def agents(self) -> Agents: ...

    @property
    def workspaces(self) -> Workspaces: ...

    @property
    def memories(self) -> Memories: ...
