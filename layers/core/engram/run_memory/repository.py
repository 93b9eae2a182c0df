"""Run memory items (RM1), persisted with the run in its (lead) agent's partition.

    PK  <t>#A#<agentId>     SK  RUNMEM#<runId>#<key>

so a run's memory is one begins_with Query and the agent cascade removes it. Values are stored as
their compact JSON text (`valueJson`): any JSON value round-trips exactly (floats, nesting, empty
strings and maps, nulls), which DynamoDB's native types would not all do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from engram.aws import keys
from engram.aws.items import encode_token, serialize
from engram.aws.table import Table
from engram.run_memory.models import RunMemoryEntry

# Attributes an entry sets; the optional ones are REMOVEd when absent, so an overwrite replaces
# the whole entry except its createdAt.
_OPTIONAL = ("source", "title", "description")


def _item_fields(entry: RunMemoryEntry, run_id: str) -> dict[str, object]:
    return {
        "runId": run_id,
        "key": entry.key,
        "kind": entry.kind,
        "valueJson": json.dumps(entry.value, ensure_ascii=False, separators=(",", ":")),
        "valueBytes": entry.value_bytes,
        "updatedAt": entry.updated_at,
        **{attr: getattr(entry, attr) for attr in _OPTIONAL},
    }


def _entry(item: dict[str, Any]) -> RunMemoryEntry:
    return RunMemoryEntry.model_validate({**item, "value": json.loads(item.get("valueJson", "null"))})


class RunMemoryRepository:
    def __init__(self, table: Table):
        self.table = table

    def put(self, tenant: str, agent_id: str, run_id: str, entry: RunMemoryEntry) -> RunMemoryEntry:
        """One UpdateItem: sets the entry's fields, keeps the createdAt of an earlier write of the
        same key; returns the entry as stored."""
        fields = _item_fields(entry, run_id)
        present = {attr: value for attr, value in fields.items() if value is not None}
        assignments = [f"#{attr} = :{attr}" for attr in present] + ["#createdAt = if_not_exists(#createdAt, :createdAt)"]
        absent = [f"#{attr}" for attr in fields if attr not in present]
        item = self.table.update(
            keys.agent_pk(tenant, agent_id),
            keys.run_memory_sk(run_id, entry.key),
            "SET " + ", ".join(assignments) + (" REMOVE " + ", ".join(absent) if absent else ""),
            names={f"#{attr}": attr for attr in [*fields, "createdAt"]},
            values={**{f":{attr}": value for attr, value in present.items()}, ":createdAt": entry.created_at},
        )
        return _entry(item)

    def put_many(self, tenant: str, agent_id: str, run_id: str, entries: Iterable[RunMemoryEntry]) -> None:
        """BatchWriteItem of whole entries (the caller's inputs at run start), retrying unprocessed
        items with backoff. Entries are written as given, createdAt included."""
        pk = keys.agent_pk(tenant, agent_id)
        items = [
            {"PK": pk, "SK": keys.run_memory_sk(run_id, e.key), **_item_fields(e, run_id), "createdAt": e.created_at}
            for e in entries
        ]
        self.table.batch_write(puts=items)

    def load(self, tenant: str, agent_id: str, run_id: str) -> list[RunMemoryEntry]:
        """Every entry of the run (all pages), in createdAt order."""
        items = self.table.query_all(keys.agent_pk(tenant, agent_id), sk_prefix=keys.run_memory_prefix(run_id))
        return sorted((_entry(i) for i in items), key=lambda e: (e.created_at, e.key))

    def page(
        self, tenant: str, agent_id: str, run_id: str, *, limit: int, token: str | None, max_bytes: int
    ) -> tuple[list[RunMemoryEntry], str | None]:
        """One page of the run's entries in key order: at most `limit` entries and, past the
        first, at most `max_bytes` of values (an entry may hold 64 KB or more)."""
        pk = keys.agent_pk(tenant, agent_id)
        items, nxt = self.table.query(pk, sk_prefix=keys.run_memory_prefix(run_id), limit=limit, token=token)
        entries: list[RunMemoryEntry] = []
        size = 0
        for item in items:
            entry = _entry(item)
            if entries and size + entry.value_bytes > max_bytes:
                # The page ends before this entry: the token resumes after the last one kept.
                return entries, encode_token(serialize({"PK": pk, "SK": keys.run_memory_sk(run_id, entries[-1].key)}))
            entries.append(entry)
            size += entry.value_bytes
        return entries, nxt

    def agent_entries(self, tenant: str, agent_id: str) -> list[tuple[str, RunMemoryEntry]]:
        """(runId, entry) of every run memory held in the agent's partition (account export)."""
        items = self.table.query_all(keys.agent_pk(tenant, agent_id), sk_prefix="RUNMEM#")
        return [(str(i.get("runId", "")), _entry(i)) for i in items]
