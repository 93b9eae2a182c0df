"""User facts in the user's partition `<t>#U`; active facts carry a sparse GSI2 key ordered by
most recent reference, so the prompt's top 10 is one bounded Query."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engram.aws import keys, quotas
from engram.aws.table import Cancelled, ConditionFailed, Table
from engram.facts.models import Fact
from engram.kernel.errors import Conflict
from engram.memory.repository import inverse_recency

_CHANGED = "the fact changed while it was being updated; retry"


def fact_rank(f: Fact) -> str:
    return f"{inverse_recency(f.last_referenced_at or f.created_at):013d}#{f.id}"


class FactRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, t: str, f: Fact) -> dict[str, Any]:
        item = {"PK": keys.user_pk(t), "SK": keys.fact_sk(f.id), **f.model_dump(by_alias=True, mode="json")}
        if f.archived_at is None:
            item["GSI2PK"] = keys.fact_rank_pk(t)
            item["GSI2SK"] = fact_rank(f)
        return item

    def create(self, t: str, f: Fact, *, limit: int) -> None:
        """A new active fact, within the tenant's `limit` of active facts (QuotaExceeded)."""
        try:
            quotas.create_within(
                self.table, [self.table.put_op(self.item(t, f), condition="attribute_not_exists(PK)")], quotas.facts(t, limit)
            )
        except ConditionFailed:
            raise Conflict(_CHANGED, field="factId", code="fact_changed") from None

    def put(
        self, t: str, f: Fact, *, expect_updated_at: str | None = None, was_active: bool | None = None, limit: int = 0
    ) -> None:
        """Stores a fact (if given: only if unchanged since `expect_updated_at`). Archiving it (`was_active` and now archived)
        frees room in the quota of active facts; restoring it takes room (`limit`), in the same commit."""
        if expect_updated_at is None:
            ops = [self.table.put_op(self.item(t, f))]
        else:
            ops = [self.table.put_op(self.item(t, f), condition="updatedAt = :seen", values={":seen": expect_updated_at})]
        active = f.archived_at is None
        try:
            if was_active is None or was_active == active:
                self.table.transact(ops)
            elif active:
                quotas.create_within(self.table, ops, quotas.facts(t, limit))
            else:
                quotas.delete_releasing(self.table, quotas.facts(t), ops)
        except ConditionFailed:
            raise Conflict(_CHANGED, field="factId", code="fact_changed") from None

    def get(self, t: str, fact_id: str) -> Fact | None:
        item = self.table.get(keys.user_pk(t), keys.fact_sk(fact_id))
        return Fact.model_validate(item) if item else None

    def all(self, t: str) -> list[Fact]:
        return [Fact.model_validate(i) for i in self.table.query_all(keys.user_pk(t), sk_prefix="FACT#")]

    def top(self, t: str, limit: int) -> list[Fact]:
        if limit <= 0:
            return []
        items, _ = self.table.query(keys.fact_rank_pk(t), index="GSI2", limit=limit)
        return [Fact.model_validate(i) for i in items]

    def bump(self, t: str, facts: Iterable[Fact], when: str) -> None:
        """Marks injected facts as referenced: one transaction, Update-only (a concurrent edit of the
        text is never overwritten), skipped as a whole if one of them was archived meanwhile."""
        ops = [
            self.table.update_op(
                keys.user_pk(t),
                keys.fact_sk(f.id),
                "SET lastReferencedAt = :when, GSI2SK = :rank",
                condition="attribute_exists(GSI2PK)",
                values={":when": when, ":rank": fact_rank(f.model_copy(update={"last_referenced_at": when}))},
            )
            for f in facts
        ]
        for start in range(0, len(ops), 100):
            try:
                self.table.transact(ops[start : start + 100])
            except Cancelled:
                pass  # archived meanwhile (or a conflicting write): its reference is not worth a retry

    def delete_all(self, t: str) -> int:
        deleted = self.table.delete_all(keys.user_pk(t), sk_prefix="FACT#")
        quotas.forget(self.table, quotas.facts(t))
        return deleted
