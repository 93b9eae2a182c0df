"""Usage rows: the tenant's usage partition, and per agent (GSI1) by session key and time; the
usage totals beside them (usage.totals), added to in the same writes; the person's limits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from engram.aws import keys
from engram.aws.items import serialize
from engram.aws.table import ConditionFailed, IdempotencyMismatch, Table
from engram.usage import totals
from engram.usage.limits import Spend
from engram.usage.models import Limits, UsageRow


class UsageRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, tenant: str, row: UsageRow) -> dict[str, Any]:
        return {
            "PK": keys.usage_pk(tenant),
            "SK": f"{row.created_at}#{row.id}",
            "GSI1PK": keys.usage_by_agent(tenant, row.agent_id),
            "GSI1SK": f"{row.session_key}#{row.created_at}#{row.id}",
            **row.model_dump(by_alias=True),
        }

    def put(self, tenant: str, row: UsageRow) -> None:
        self.table.put(self.item(tenant, row))

    # --- totals -----------------------------------------------------------------------------------
    def totals_ops(self, tenant: str, rows: Sequence[UsageRow], *, kind: str, tool_calls: int = 0) -> list[dict[str, object]]:
        """The ADD updates of the totals `rows` add to, for the transaction that writes them: a
        transaction that applies once (a condition on the run or the job guards it) counts once."""
        ops: list[dict[str, object]] = []
        built: dict[int, dict[str, object]] = {}  # a day's and its month's items add the same delta
        for pk, sk, delta in totals.updates(tenant, rows, kind=kind, tool_calls=tool_calls):
            if id(delta) in built:  # serialised once (most of the cost): only the key differs
                ops.append({"Update": {**built[id(delta)], "Key": serialize({"PK": pk, "SK": sk})}})
                continue
            expression, names, values = totals.add_expression(delta)
            op = self.table.update_op(pk, sk, expression, names=names, values=values)
            inner = op["Update"]
            assert isinstance(inner, dict)
            built[id(delta)] = inner
            ops.append(op)
        return ops

    def record(self, tenant: str, row: UsageRow, *, kind: str) -> bool:
        """A job's usage row and its totals in one transaction, once: a row already stored (a
        redelivered job, a retry after a lost answer) is neither written again nor counted
        again. Whether this call recorded it."""
        put = self.table.put_op(self.item(tenant, row), condition="attribute_not_exists(PK)")
        try:
            # The token: a retry after a lost answer is answered, not refused by its own condition.
            self.table.transact([put, *self.totals_ops(tenant, [row], kind=kind)], token=f"u-{row.id}"[-36:])
        except (ConditionFailed, IdempotencyMismatch):  # stored already (the mismatch: with other figures)
            return False
        return True

    def spend(self, tenant: str, agent_id: str, day: date) -> Spend:
        """The person's and the agent's spending this day and month, and the person's limits:
        one BatchGetItem of five keys."""
        pk = keys.usage_totals_pk(tenant)
        d, m = day.isoformat(), day.isoformat()[:7]
        wanted = {
            keys.usage_total_sk(d, agent_id): "agent_day",
            keys.usage_total_sk(m, agent_id): "agent_month",
            keys.usage_total_sk(d): "user_day",
            keys.usage_total_sk(m): "user_month",
        }
        found = self.table.get_many([(pk, sk) for sk in (*wanted, keys.USAGE_LIMITS_SK)])
        costs: dict[str, float] = {}
        limits = None
        for item in found:
            if item["SK"] == keys.USAGE_LIMITS_SK:
                limits = Limits.model_validate(item)
            elif item["SK"] in wanted:
                costs[wanted[item["SK"]]] = float(totals.whole(item)["costUsd"])
        return Spend(day=day, user_limits=limits, **costs)

    def limits(self, tenant: str) -> Limits | None:
        item = self.table.get(keys.usage_totals_pk(tenant), keys.USAGE_LIMITS_SK)
        return Limits.model_validate(item) if item else None

    def set_limits(self, tenant: str, limits: Limits | None) -> None:
        pk = keys.usage_totals_pk(tenant)
        if limits is None:
            self.table.delete(pk, keys.USAGE_LIMITS_SK)
        else:
            self.table.put({"PK": pk, "SK": keys.USAGE_LIMITS_SK, **limits.public()})

    def totals(
        self, tenant: str, start: date, end: date, *, agent_id: str | None = None, months: bool = False
    ) -> list[dict[str, object]]:
        """The totals items of `start`..`end` (days, or the months they fall in), the person's or
        one agent's, oldest first: one Query."""
        first, last = (start.isoformat(), end.isoformat()) if not months else (start.isoformat()[:7], end.isoformat()[:7])
        items = self.table.query_all(
            keys.usage_totals_pk(tenant),
            sk_after=keys.usage_total_sk(first, agent_id),
            sk_before=keys.usage_total_sk(last, agent_id),
        )
        return items

    def page(
        self, tenant: str, *, agent_id: str | None, session_key: str | None, limit: int, token: str | None
    ) -> tuple[list[UsageRow], str | None]:
        if agent_id:
            items, nxt = self.table.query(
                keys.usage_by_agent(tenant, agent_id),
                index="GSI1",
                sk_prefix=f"{session_key}#" if session_key else None,
                limit=limit,
                token=token,
                newest_first=not session_key,
            )
        else:
            items, nxt = self.table.query(keys.usage_pk(tenant), limit=limit, token=token, newest_first=True)
        return [UsageRow.model_validate(i) for i in items], nxt

    def all_rows(self, tenant: str) -> list[dict[str, object]]:
        """Every usage row of the tenant, as stored minus its keys (account export)."""
        rows = self.table.query_all(keys.usage_pk(tenant))
        return [{k: v for k, v in row.items() if not k.startswith(("PK", "SK", "GSI"))} for row in rows]

    def all_totals(self, tenant: str) -> list[dict[str, object]]:
        """Every totals item and the limits (account export): `{period, agentId?, ...}`."""
        out: list[dict[str, object]] = []
        for item in self.table.query_all(keys.usage_totals_pk(tenant)):
            sk = str(item["SK"])
            named: dict[str, object] = {"limits": True} if sk == keys.USAGE_LIMITS_SK else _period_of(sk)
            out.append({**named, **{k: v for k, v in item.items() if k not in ("PK", "SK")}})
        return out

    def delete_all(self, tenant: str) -> int:
        """The rows, the totals and the limits; returns how many rows."""
        self.table.delete_all(keys.usage_totals_pk(tenant))
        return self.table.delete_all(keys.usage_pk(tenant))


def _period_of(sk: str) -> dict[str, object]:
    """`U#D#2026-11-27` -> {period: "2026-11-27"}; `A#ag_1#M#2026-11` -> {agentId, period}."""
    parts = sk.split("#")
    return {"period": parts[-1], **({"agentId": parts[1]} if parts[0] == "A" else {})}
