"""Long-term memory rows (agent and workspace scope) in the single table.

A memory's id is derived from (scope, owner, key), so "unique key per scope" and "every create
is an upsert by key" hold by construction. Active rows also carry a sparse GSI2 rank key
(pinned, importance desc, most recent) so the prompt reads its top rows with one bounded Query,
however many rows exist. Director learnings are indexed per agent on GSI1 instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import Conflict, NotFound
from engram.memory.models import Memory, is_director_learning, is_live

_CHANGED = "the memory changed while it was being updated; retry"


def owner_pk(tenant: str, scope: str, owner_id: str) -> str:
    return keys.agent_pk(tenant, owner_id) if scope == "agent" else keys.workspace_pk(tenant, owner_id)


def memory_rank(m: Memory) -> str:
    recency = keys.inverse_recency(m.updated_at)
    return f"{0 if m.pinned else 1}#{100 - m.importance:03d}#{recency:013d}#{m.id}"


class MemoryRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, tenant: str, m: Memory, owner_id: str) -> dict[str, object]:
        pk = owner_pk(tenant, m.scope, owner_id)
        item = {"PK": pk, "SK": keys.memory_sk(m.id), "ownerId": owner_id, **m.model_dump(by_alias=True, mode="json")}
        if m.archived_at is None and is_director_learning(m):
            # Shown in their own prompt section (run_memory.learnings), newest first; not in the rank index.
            item["GSI1PK"] = keys.learnings_by_agent(tenant, owner_id)
            item["GSI1SK"] = f"{m.created_at}#{m.id}"
        elif m.archived_at is None:
            item["GSI2PK"] = keys.memory_rank_pk(pk)
            item["GSI2SK"] = memory_rank(m)
        if m.expires_at:
            item["expiresAt"] = m.expires_at
        return item

    def put(self, tenant: str, m: Memory, owner_id: str, *, expect_updated_at: str | None = None) -> None:
        """With `expect_updated_at` (read-modify-write), refused if the row changed since it was read."""
        try:
            if expect_updated_at is None:
                self.table.put(self.item(tenant, m, owner_id))
            else:
                self.table.put(self.item(tenant, m, owner_id), condition="updatedAt = :seen", values={":seen": expect_updated_at})
        except ConditionFailed:
            raise Conflict(_CHANGED, field="memoryId", code="memory_changed") from None

    def create(self, tenant: str, m: Memory, owner_id: str, *, limit: int) -> None:
        """A new row, within the owner's `limit` of rows (QuotaExceeded); a 409 if the same key was
        stored meanwhile."""
        pk = owner_pk(tenant, m.scope, owner_id)
        try:
            quotas.create_within(
                self.table,
                [self.table.put_op(self.item(tenant, m, owner_id), condition="attribute_not_exists(PK)")],
                quotas.memories(pk, m.scope, limit),
            )
        except ConditionFailed:
            raise Conflict(_CHANGED, field="memoryId", code="memory_changed") from None

    def quota(self, tenant: str, scope: str, owner_id: str, limit: int) -> quotas.Quota:
        return quotas.memories(owner_pk(tenant, scope, owner_id), scope, limit)

    def get(self, tenant: str, scope: str, owner_id: str, mid: str) -> Memory | None:
        item = self.table.get(owner_pk(tenant, scope, owner_id), keys.memory_sk(mid))
        return Memory.model_validate(item) if item else None

    def get_many(self, tenant: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        unique = {mid: (scope, owner) for scope, owner, mid in wanted}
        items = self.table.get_many(
            [(owner_pk(tenant, scope, owner), keys.memory_sk(mid)) for mid, (scope, owner) in unique.items()]
        )
        return {m.id: m for m in (Memory.model_validate(i) for i in items)}

    def all(self, tenant: str, scope: str, owner_id: str) -> list[Memory]:
        items = self.table.query_all(owner_pk(tenant, scope, owner_id), sk_prefix="MEM#")
        return [Memory.model_validate(i) for i in items]

    def top(
        self,
        tenant: str,
        scope: str,
        owner_id: str,
        *,
        limit: int,
        session_id: str | None,
        page: int = 50,
        wanted: Callable[[list[Memory]], int] | None = None,
    ) -> list[Memory]:
        """The owner's live rows in injection order (pinned > importance > recent), at most `limit`.
        With `wanted`, pages of `page` rows and then of as many as `wanted(rows so far)` asks for
        (more when rows were skipped, in the proportion skipped so far; at most `limit` a page),
        until it asks for none (the rows read are enough); without it, pages of `limit` rows."""
        if limit <= 0:
            return []
        pk = keys.memory_rank_pk(owner_pk(tenant, scope, owner_id))
        out: list[Memory] = []
        token = None
        now = time.time()
        most = max(page, limit)
        size = page if wanted is not None else most
        scanned = 0
        for _ in range(20):  # bounded: expired or other-session rows are skipped, not unbounded
            items, token = self.table.query(pk, index="GSI2", limit=size, token=token)
            scanned += len(items)
            for item in items:
                m = Memory.model_validate(item)
                if not is_live(m, now) or (m.category == "conversation" and m.session_id != session_id):
                    continue
                out.append(m)
                if len(out) >= limit:
                    return out
            if not token:
                break
            if wanted is not None:
                want = min(wanted(out), limit - len(out))
                if want <= 0:
                    break
                size = min(most, -(-want * scanned // len(out))) if out else most
        return out

    def recent_learnings(self, tenant: str, agent_id: str, *, limit: int) -> list[Memory]:
        """An agent's `limit` newest active director learnings, newest first (one bounded Query)."""
        if limit <= 0:
            return []
        items, _ = self.table.query(keys.learnings_by_agent(tenant, agent_id), index="GSI1", limit=limit, newest_first=True)
        return [Memory.model_validate(i) for i in items]

    def delete(self, tenant: str, scope: str, owner_id: str, mid: str) -> None:
        pk = owner_pk(tenant, scope, owner_id)
        try:
            delete = self.table.delete_op(pk, keys.memory_sk(mid), condition="attribute_exists(PK)")
            quotas.delete_releasing(self.table, quotas.memories(pk, scope), [delete])
        except ConditionFailed:
            raise NotFound("memory not found", field="memoryId") from None

    def delete_owner(self, tenant: str, scope: str, owner_id: str) -> int:
        """Removes every memory row of an agent or workspace (the agent cascade covers agents)."""
        deleted = self.table.delete_all(owner_pk(tenant, scope, owner_id), sk_prefix="MEM#")
        quotas.forget(self.table, self.quota(tenant, scope, owner_id, 0))
        return deleted

    def delete_session_memories(self, tenant: str, agent_id: str, session_id: str) -> int:
        """Conversation-category rows are bound to their session and go with it."""
        rows = [m for m in self.all(tenant, "agent", agent_id) if m.category == "conversation" and m.session_id == session_id]
        self.table.batch_write(deletes=[(keys.agent_pk(tenant, agent_id), keys.memory_sk(m.id)) for m in rows])
        quotas.released(self.table, self.quota(tenant, "agent", agent_id, 0), len(rows))
        return len(rows)
