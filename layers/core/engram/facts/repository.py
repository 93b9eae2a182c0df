"""User facts in the user's partition `<t>#U`; active facts carry a sparse GSI2 key ordered by
most recent reference, so the prompt's top 10 is one bounded Query.

Beside them, `FACTTEXT#<sha256 of the normalised text>` rows name the fact holding each text,
written in the same transaction as the fact, so the duplicate check of an add is one read. A row
is a pointer, checked against the fact it names (an archived or since-edited fact is no match);
the `FACTTEXT` marker says every fact of the partition has its row (facts stored before these
rows existed are indexed once, by the first add that finds the marker missing). The rows share
the partition, so deleting the account deletes them; lists and export read `FACT#` only."""

from __future__ import annotations

from collections.abc import Iterable

from engram.aws import keys, quotas
from engram.aws.keys import inverse_recency
from engram.aws.table import Cancelled, ConditionFailed, Table
from engram.facts.models import Fact, text_digest
from engram.facts.ports import DuplicateText
from engram.kernel.errors import Conflict

_CHANGED = "the fact changed while it was being updated; retry"


def fact_rank(f: Fact) -> str:
    return f"{inverse_recency(f.last_referenced_at or f.created_at):013d}#{f.id}"


class FactRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, tenant: str, f: Fact) -> dict[str, object]:
        item = {"PK": keys.user_pk(tenant), "SK": keys.fact_sk(f.id), **f.model_dump(by_alias=True, mode="json")}
        if f.archived_at is None:
            item["GSI2PK"] = keys.fact_rank_pk(tenant)
            item["GSI2SK"] = fact_rank(f)
        return item

    def put(
        self, tenant: str, f: Fact, *, expect_updated_at: str | None = None, was_active: bool | None = None, limit: int = 0
    ) -> None:
        """Writes a fact (if given: only if unchanged since `expect_updated_at`). Archiving it (`was_active` and now archived)
        frees room in the quota of active facts; restoring it takes room (`limit`), in the same commit."""
        if expect_updated_at is None:
            ops = [self.table.put_op(self.item(tenant, f))]
        else:
            ops = [self.table.put_op(self.item(tenant, f), condition="updatedAt = :seen", values={":seen": expect_updated_at})]
        self._commit(tenant, f, ops, was_active=was_active, limit=limit)

    def create(self, tenant: str, f: Fact, *, limit: int, replacing: str | None = None) -> None:
        """Writes a new active fact and claims its text, within the tenant's `limit` of active facts
        (QuotaExceeded): one transaction. The text's row may only be absent or still name
        `replacing` (the stale holder the caller looked at); else another add claimed the text
        first: DuplicateText, and the caller looks again."""
        pk = keys.user_pk(tenant)
        claim = "attribute_not_exists(PK)" + (" OR factId = :stale" if replacing else "")
        ops = [
            self.table.put_op(self.item(tenant, f), condition="attribute_not_exists(PK)"),
            self.table.put_op(self._text_row(pk, f), condition=claim, values={":stale": replacing} if replacing else None),
        ]
        try:
            quotas.create_within(self.table, ops, quotas.facts(tenant, limit))
        except ConditionFailed as err:
            if err.failed_at(1):
                raise DuplicateText() from None
            raise Conflict(_CHANGED, field="factId", code="fact_changed") from None

    def put_reindexed(self, tenant: str, f: Fact, *, expect_updated_at: str, was_active: bool, limit: int) -> None:
        """An edit that changes what the duplicate check must find (new text, or unarchived): the
        fact, conditional on the version read, and its text's row, in one transaction (with the
        quota's claim when it is restored from the archive)."""
        ops = [
            self.table.put_op(self.item(tenant, f), condition="updatedAt = :seen", values={":seen": expect_updated_at}),
            self.table.put_op(self._text_row(keys.user_pk(tenant), f)),
        ]
        self._commit(tenant, f, ops, was_active=was_active, limit=limit)

    def _commit(self, tenant: str, f: Fact, ops: list[dict[str, object]], *, was_active: bool | None, limit: int) -> None:
        active = f.archived_at is None
        try:
            if was_active is None or was_active == active:
                self.table.transact(ops)
            elif active:
                quotas.create_within(self.table, ops, quotas.facts(tenant, limit))
            else:
                quotas.delete_releasing(self.table, quotas.facts(tenant), ops)
        except ConditionFailed:
            raise Conflict(_CHANGED, field="factId", code="fact_changed") from None

    def by_text(self, tenant: str, text: str) -> tuple[Fact | None, str | None, bool]:
        """(the fact the text's row names, that fact's id, whether the partition is indexed): one
        BatchGetItem of the text's row and the marker, plus one GetItem when a row names a fact.
        The fact may be archived or hold another text by now: the caller checks."""
        pk = keys.user_pk(tenant)
        found = {
            i["SK"]: i for i in self.table.get_many([(pk, keys.fact_text_sk(text_digest(text))), (pk, keys.FACT_TEXT_INDEXED_SK)])
        }
        indexed = keys.FACT_TEXT_INDEXED_SK in found
        row = found.get(keys.fact_text_sk(text_digest(text)))
        if row is None:
            return None, None, indexed
        return self.get(tenant, row["factId"]), row["factId"], indexed

    def index_texts(self, tenant: str) -> None:
        """Writes the text row of every active fact, then the marker (facts stored before the
        rows existed; idempotent, so two adds racing to do it do no harm)."""
        pk = keys.user_pk(tenant)
        self.table.batch_write(puts=[self._text_row(pk, f) for f in self.all(tenant) if f.archived_at is None])
        self.table.put({"PK": pk, "SK": keys.FACT_TEXT_INDEXED_SK})

    @staticmethod
    def _text_row(pk: str, f: Fact) -> dict[str, object]:
        return {"PK": pk, "SK": keys.fact_text_sk(text_digest(f.fact)), "factId": f.id}

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        item = self.table.get(keys.user_pk(tenant), keys.fact_sk(fact_id))
        return Fact.model_validate(item) if item else None

    def all(self, tenant: str) -> list[Fact]:
        return [Fact.model_validate(i) for i in self.table.query_all(keys.user_pk(tenant), sk_prefix="FACT#")]

    def top(self, tenant: str, limit: int) -> list[Fact]:
        if limit <= 0:
            return []
        items, _ = self.table.query(keys.fact_rank_pk(tenant), index="GSI2", limit=limit)
        return [Fact.model_validate(i) for i in items]

    def bump(self, tenant: str, facts: Iterable[Fact], when: str) -> None:
        """Marks injected facts as referenced: one transaction, Update-only (a concurrent edit of the
        text is never overwritten), skipped as a whole if one of them was archived meanwhile."""
        ops = [
            self.table.update_op(
                keys.user_pk(tenant),
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

    def delete_all(self, tenant: str) -> int:
        """Every fact, then the rest of the partition (the text rows and their marker); the count is of facts."""
        facts = self.table.delete_all(keys.user_pk(tenant), sk_prefix="FACT#")
        self.table.delete_all(keys.user_pk(tenant))  # the text rows, their marker and the quota counter
        quotas.forget(self.table, quotas.facts(tenant))
        return facts


PROFILE_SK = "PROFILE"  # in the facts partition: deleted with it, exported with the account


class ProfileRepository:
    def __init__(self, table: Table):
        self.table = table

    def name(self, tenant: str) -> str | None:
        item = self.table.get(keys.user_pk(tenant), PROFILE_SK)
        name = (item or {}).get("name")
        return name if isinstance(name, str) and name else None

    def set_name(self, tenant: str, name: str | None, *, only_if_unset: bool = False) -> bool:
        pk = keys.user_pk(tenant)
        try:
            if name is None:
                self.table.update(pk, PROFILE_SK, "REMOVE #n", names={"#n": "name"})
            else:
                self.table.update(
                    pk,
                    PROFILE_SK,
                    "SET #n = :name",
                    condition="attribute_not_exists(#n)" if only_if_unset else None,
                    names={"#n": "name"},
                    values={":name": name},
                )
        except ConditionFailed:
            return False
        return True
