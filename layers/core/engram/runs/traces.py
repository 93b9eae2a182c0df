"""A run's timeline (OB1, engram.kernel.trace) as stored: one item per part, in the run's agent's
partition (so the agent cascade deletes it with the run), expiring with the run record.

The turn's part ("turn") is a Put of the turn's own commit transaction (engine.turn passes `item`
among its extra items: no round trip of its own); each job the turn caused (the summary fold, the
extraction) writes its part when it is done (`put`). The spans are compact JSON in one string
attribute, at most TRACE_MAX_BYTES (the trace drops spans past it and says so)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from engram.aws import keys
from engram.aws.table import Table
from engram.runs.models import Run


class TraceRepository:
    def __init__(self, table: Table, expiry: Callable[[Run], int | None]):
        self.table = table
        self.expiry = expiry  # the run record's own TTL (runs.repository.retention_expiry)

    def item(self, tenant: str, run: Run, trace: Mapping[str, object], part: str = "turn") -> dict[str, object]:
        item: dict[str, object] = {
            "PK": keys.agent_pk(tenant, run.agent_id),
            "SK": keys.trace_sk(run.id, part),
            "runId": run.id,
            "trace": json.dumps(trace, separators=(",", ":"), ensure_ascii=False, default=str),
        }
        expires_at = self.expiry(run)
        if expires_at is not None:
            item["expiresAt"] = expires_at
        return item

    def put(self, tenant: str, run: Run, trace: Mapping[str, object], part: str) -> None:
        self.table.put(self.item(tenant, run, trace, part))

    def parts(self, tenant: str, agent_id: str, run_id: str) -> list[dict[str, object]]:
        """Every stored part of one run's timeline."""
        items = self.table.query_all(keys.agent_pk(tenant, agent_id), sk_prefix=keys.trace_prefix(run_id))
        return [_parsed(i) for i in items]

    def agent_parts(self, tenant: str, agent_id: str) -> list[dict[str, object]]:
        """Every stored timeline part of the agent's runs (the account export), each with its runId."""
        items = self.table.query_all(keys.agent_pk(tenant, agent_id), sk_prefix=keys.TRACE_PREFIX)
        return [{**_parsed(i), "runId": i.get("runId")} for i in items]


def _parsed(item: Mapping[str, object]) -> dict[str, object]:
    parsed = json.loads(str(item.get("trace") or "{}"))
    return parsed if isinstance(parsed, dict) else {}
