"""Long-term memory rows (agent and workspace scope) in the single table.

A memory's id is derived from (scope, owner, key), so "unique key per scope" and "every create
is an upsert by key" hold by construction. Active rows also carry a sparse GSI2 rank key
(pinned, importance desc, most recent) so the prompt reads its top rows with one bounded Query,
however many rows exist. Director learnings are indexed per agent on GSI1 instead.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table, query_after
from engram.kernel.errors import Conflict, NotFound
from engram.memory.models import ENTRY_ATTRIBUTES, Memory, MemoryEntry, is_director_learning, is_live

_CHANGED = "the memory changed while it was being updated; retry"


def owner_pk(tenant: str, scope: str, owner_id: str) -> str:
    return keys.agent_pk(tenant, owner_id) if scope == "agent" else keys.workspace_pk(tenant, owner_id)


def memory_rank(m: Memory) -> str:
    recency = keys.inverse_recency(m.updated_at)
    return f"{0 if m.pinned else 1}#{100 - m.importance:03d}#{recency:013d}#{m.id}"


class MemoryRepository:
    def __init__(self, table: Table):
        self.table = table
        self._read = _ReadAhead()

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

    def top(self, tenant: str, scope: str, owner_id: str, *, limit: int, session_id: str | None) -> list[Memory]:
        """The owner's live rows in injection order (pinned > importance > recent), at most `limit`
        (pages of `limit` rows past skipped ones: expired, another session's conversation rows)."""
        pages = _Pages(self.table, keys.memory_rank_pk(owner_pk(tenant, scope, owner_id)), (), None)
        return _ranked(pages, Memory.model_validate, limit=limit, session_id=session_id, page=limit, wanted=None)

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
        """`top`'s rows with only the attributes of a MemoryEntry (what the prompt's sections show).
        With `wanted`, pages of `page` rows and then of as many as `wanted(rows so far)` asks for
        (more when rows were skipped, in the proportion skipped so far; at most `limit` a page),
        until it asks for none (the rows read are enough); without it, pages of `limit` rows."""
        pk = keys.memory_rank_pk(owner_pk(tenant, scope, owner_id))
        pages = _Pages(self.table, pk, ENTRY_ATTRIBUTES, self._read if wanted is not None else None)
        return _ranked(pages, MemoryEntry.model_validate, limit=limit, session_id=session_id, page=page, wanted=wanted)

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


class _ReadAhead:
    """How many rows the last ranked read of each owner took, in this process (a warm function's
    container; the newest `KEPT` owners): the next read asks DynamoDB for that many at once, so a
    read that took two pages (a first page, then one sized on its rows' cost) takes one Query
    where nothing changed. The pages, and so the rows kept, stay those of `_ranked`: only how
    they are fetched changes."""

    KEPT = 1024

    def __init__(self) -> None:
        self._rows: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self, pk: str) -> int:
        with self._lock:
            return self._rows.get(pk, 0)

    def took(self, pk: str, rows: int) -> None:
        with self._lock:
            self._rows[pk] = rows
            self._rows.move_to_end(pk)
            while len(self._rows) > self.KEPT:
                self._rows.popitem(last=False)


class _Pages:
    """The owner's rank index page by page (`take`), fetched from DynamoDB in as few Queries as
    the last read of the same owner took (`_ReadAhead`): a page is served from rows read ahead
    when they hold it. With `attributes`, each row read has only those (and its rank key)."""

    def __init__(self, table: Table, pk: str, attributes: tuple[str, ...], ahead: _ReadAhead | None) -> None:
        self.table, self.pk, self.attributes, self.ahead = table, pk, attributes, ahead
        self.buffer: list[dict[str, object]] = []
        self.last: str | None = None  # the rank key of the last row fetched
        self.more = True  # rows follow those fetched
        self.fetched = 0
        self.taken = 0

    def take(self, size: int) -> tuple[list[dict[str, object]], bool]:
        """The next `size` rows, and whether more follow them."""
        if len(self.buffer) < size and self.more:
            ahead = self.ahead.rows(self.pk) - self.fetched if self.ahead is not None else 0
            want = max(size - len(self.buffer), ahead)
            items, self.more = query_after(
                self.table, self.pk, index="GSI2", after=self.last, limit=want, attributes=self.attributes
            )
            if items:
                self.last = str(items[-1]["GSI2SK"])
            self.fetched += len(items)
            self.buffer += items
        page, self.buffer = self.buffer[:size], self.buffer[size:]
        self.taken += len(page)
        return page, bool(self.buffer) or self.more

    def done(self) -> None:
        if self.ahead is not None:
            self.ahead.took(self.pk, self.taken)


def _ranked[R: (Memory, MemoryEntry)](
    pages: _Pages,
    parse: Callable[[dict[str, object]], R],
    *,
    limit: int,
    session_id: str | None,
    page: int,
    wanted: Callable[[list[R]], int] | None,
) -> list[R]:
    """The live rows of `pages` in their order, at most `limit` (MemoryRepository.top)."""
    if limit <= 0:
        return []
    out: list[R] = []
    now = time.time()
    most = max(page, limit)
    size = page if wanted is not None else most
    scanned = 0
    try:
        for _ in range(20):  # bounded: expired or other-session rows are skipped, not unbounded
            items, more = pages.take(size)
            scanned += len(items)
            for item in items:
                m = parse(item)
                if not is_live(m, now) or (m.category == "conversation" and m.session_id != session_id):
                    continue
                out.append(m)
                if len(out) >= limit:
                    return out
            if not more:
                break
            if wanted is not None:
                want = min(wanted(out), limit - len(out))
                if want <= 0:
                    break
                size = min(most, -(-want * scanned // len(out))) if out else most
        return out
    finally:
        pages.done()
