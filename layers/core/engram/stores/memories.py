"""Long-term memory rows (agent and workspace scope) and user facts, in the single table.

A memory's id is derived from (scope, owner, key), so "unique key per scope" and "every create
is an upsert by key" hold by construction. Active rows also carry a sparse GSI2 rank key
(pinned, importance desc, most recent) so the prompt reads its top rows with one bounded Query,
however many rows exist.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime
from typing import Any, Iterable

from botocore.exceptions import ClientError

from engram.kernel.errors import Conflict, NotFound
from engram.facts.models import Fact
from engram.memory.models import Memory
from engram.aws import keys
from engram.aws.table import chunks, condition_failed, serialize
from engram.stores.table import TableStore

_MAX_EPOCH_MS = 9_999_999_999_999


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def owner_pk(t: str, scope: str, owner_id: str) -> str:
    return keys.agent_pk(t, owner_id) if scope == "agent" else keys.workspace_pk(t, owner_id)


def memory_id(scope: str, owner_id: str, key: str) -> str:
    digest = hashlib.sha256(f"{scope}\x00{owner_id}\x00{key}".encode()).hexdigest()
    return f"m_{digest[:30]}"


def memory_rank(m: Memory) -> str:
    recency = _MAX_EPOCH_MS - _epoch_ms(m.updated_at)
    return f"{0 if m.pinned else 1}#{100 - m.importance:03d}#{recency:013d}#{m.id}"


def fact_rank(f: Fact) -> str:
    recency = _MAX_EPOCH_MS - _epoch_ms(f.last_referenced_at or f.created_at)
    return f"{recency:013d}#{f.id}"


LEARNING_KEY_PREFIX = "director:learning:"


def is_director_learning(m: Memory) -> bool:
    """An agent-scope row the director stored with store_learning (RM4)."""
    return m.scope == "agent" and m.source == "director" and m.key.startswith(LEARNING_KEY_PREFIX)


def is_live(m: Memory, now: float | None = None) -> bool:
    """Active and not past its daily expiry (DynamoDB TTL deletes lazily, so reads check too)."""
    if m.archived_at:
        return False
    return not (m.expires_at and m.expires_at <= (now or time.time()))


class MemoryStore:
    def __init__(self, table: TableStore):
        self.table = table

    @property
    def client(self) -> Any:
        return self.table.client

    @property
    def name(self) -> str:
        return self.table.name

    # --- memories -----------------------------------------------------------------------------
    def _memory_item(self, t: str, m: Memory, owner_id: str) -> dict[str, Any]:
        pk = owner_pk(t, m.scope, owner_id)
        item = {"PK": pk, "SK": keys.memory_sk(m.id), "ownerId": owner_id, **m.model_dump(by_alias=True, mode="json")}
        if m.archived_at is None and is_director_learning(m):
            # Shown in their own prompt section (learnings.py), newest first; not in the rank index.
            item["GSI1PK"] = keys.learnings_by_agent(t, owner_id)
            item["GSI1SK"] = f"{m.created_at}#{m.id}"
        elif m.archived_at is None:
            item["GSI2PK"] = keys.memory_rank_pk(pk)
            item["GSI2SK"] = memory_rank(m)
        if m.expires_at:
            item["expiresAt"] = m.expires_at
        return item

    def put_memory(self, t: str, m: Memory, owner_id: str, *, expect_updated_at: str | None = None) -> None:
        extra: dict[str, Any] = {}
        if expect_updated_at is not None:
            # Read-modify-write: refuse if someone changed the row since we read it.
            extra = {"ConditionExpression": "updatedAt = :seen", "ExpressionAttributeValues": serialize({":seen": expect_updated_at})}
        try:
            self.client.put_item(TableName=self.name, Item=serialize(self._memory_item(t, m, owner_id)), **extra)
        except ClientError as err:
            if condition_failed(err):
                raise Conflict("the memory changed while it was being updated; retry", field="memoryId", code="memory_changed") from None
            raise

    def get_memory(self, t: str, scope: str, owner_id: str, mid: str) -> Memory | None:
        item = self.table._get(owner_pk(t, scope, owner_id), keys.memory_sk(mid))
        return Memory.model_validate(item) if item else None

    def list_memories(self, t: str, scope: str, owner_id: str) -> list[Memory]:
        items = self.table._query_all(owner_pk(t, scope, owner_id), sk_prefix="MEM#")
        return [Memory.model_validate(i) for i in items]

    def top_memories(self, t: str, scope: str, owner_id: str, *, limit: int, session_id: str | None, page: int = 50) -> list[Memory]:
        """The owner's live rows in injection order (pinned > importance > recent), at most `limit`."""
        if limit <= 0:
            return []
        pk = keys.memory_rank_pk(owner_pk(t, scope, owner_id))
        out: list[Memory] = []
        token = None
        now = time.time()
        for _ in range(20):  # bounded: expired or other-session rows are skipped, not unbounded
            items, token = self.table._query(pk, index="GSI2", limit=max(page, limit), token=token)
            for item in items:
                m = Memory.model_validate(item)
                if not is_live(m, now) or (m.category == "conversation" and m.session_id != session_id):
                    continue
                out.append(m)
                if len(out) >= limit:
                    return out
            if not token:
                break
        return out

    def recent_learnings(self, t: str, agent_id: str, *, limit: int) -> list[Memory]:
        """An agent's `limit` newest active director learnings, newest first (one bounded Query)."""
        if limit <= 0:
            return []
        items, _ = self.table._query(keys.learnings_by_agent(t, agent_id), index="GSI1", limit=limit, newest_first=True)
        return [Memory.model_validate(i) for i in items]

    def delete_memory(self, t: str, scope: str, owner_id: str, mid: str) -> None:
        try:
            self.client.delete_item(
                TableName=self.name,
                Key=serialize({"PK": owner_pk(t, scope, owner_id), "SK": keys.memory_sk(mid)}),
                ConditionExpression="attribute_exists(PK)",
            )
        except ClientError as err:
            if condition_failed(err):
                raise NotFound("memory not found", field="memoryId") from None
            raise

    def delete_owner(self, t: str, scope: str, owner_id: str) -> int:
        """Removes every memory row of an agent or workspace (the agent cascade covers agents)."""
        items = self.table._query_all(owner_pk(t, scope, owner_id), sk_prefix="MEM#", projection="PK, SK")
        self.table._delete_keys([(i["PK"], i["SK"]) for i in items])
        return len(items)

    def delete_session_memories(self, t: str, agent_id: str, session_id: str) -> int:
        """Conversation-category rows are bound to their session and go with it."""
        rows = [m for m in self.list_memories(t, "agent", agent_id) if m.category == "conversation" and m.session_id == session_id]
        self.table._delete_keys([(keys.agent_pk(t, agent_id), keys.memory_sk(m.id)) for m in rows])
        return len(rows)

    # --- facts --------------------------------------------------------------------------------
    def _fact_item(self, t: str, f: Fact) -> dict[str, Any]:
        item = {"PK": keys.user_pk(t), "SK": keys.fact_sk(f.id), **f.model_dump(by_alias=True, mode="json")}
        if f.archived_at is None:
            item["GSI2PK"] = keys.fact_rank_pk(t)
            item["GSI2SK"] = fact_rank(f)
        return item

    def put_fact(self, t: str, f: Fact, *, expect_updated_at: str | None = None) -> None:
        extra: dict[str, Any] = {}
        if expect_updated_at is not None:
            extra = {"ConditionExpression": "updatedAt = :seen", "ExpressionAttributeValues": serialize({":seen": expect_updated_at})}
        try:
            self.client.put_item(TableName=self.name, Item=serialize(self._fact_item(t, f)), **extra)
        except ClientError as err:
            if condition_failed(err):
                raise Conflict("the fact changed while it was being updated; retry", field="factId", code="fact_changed") from None
            raise

    def get_fact(self, t: str, fact_id: str) -> Fact | None:
        item = self.table._get(keys.user_pk(t), keys.fact_sk(fact_id))
        return Fact.model_validate(item) if item else None

    def list_facts(self, t: str) -> list[Fact]:
        return [Fact.model_validate(i) for i in self.table._query_all(keys.user_pk(t), sk_prefix="FACT#")]

    def top_facts(self, t: str, limit: int) -> list[Fact]:
        if limit <= 0:
            return []
        items, _ = self.table._query(keys.fact_rank_pk(t), index="GSI2", limit=limit)
        return [Fact.model_validate(i) for i in items]

    def bump_facts(self, t: str, facts: Iterable[Fact], when: str) -> None:
        """Marks injected facts as referenced: one transaction, Update-only (a concurrent edit of the
        text is never overwritten), skipped as a whole if one of them was archived meanwhile."""
        updates = []
        for f in facts:
            rank = fact_rank(f.model_copy(update={"last_referenced_at": when}))
            updates.append(
                {
                    "Update": {
                        "TableName": self.name,
                        "Key": serialize({"PK": keys.user_pk(t), "SK": keys.fact_sk(f.id)}),
                        "UpdateExpression": "SET lastReferencedAt = :when, GSI2SK = :rank",
                        "ConditionExpression": "attribute_exists(GSI2PK)",
                        "ExpressionAttributeValues": serialize({":when": when, ":rank": rank}),
                    }
                }
            )
        for batch in chunks(updates, 100):
            try:
                self.client.transact_write_items(TransactItems=batch)
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise

    def delete_all_facts(self, t: str) -> int:
        items = self.table._query_all(keys.user_pk(t), projection="PK, SK")
        self.table._delete_keys([(i["PK"], i["SK"]) for i in items])
        return len(items)

