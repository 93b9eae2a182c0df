"""What the extraction worker reads and writes in the single table.

Idempotency per run: a marker item `EXTRACT#<runId>` in the agent's partition. A job claims it
with one conditional UpdateItem (absent, or a lease that has run out); everything the job stores
(auto rows, superseded rows, its usage row) commits in ONE transaction that also flips the marker
to `done`, conditional on this attempt still holding it. So a redelivered job finds `done` and
stores nothing, and a job that died half-way stored nothing and is simply run again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from engram.kernel.errors import Conflict
from engram.memory.models import Memory
from engram.usage.models import UsageRow
from engram.kernel.model import now_iso
from engram.aws import keys
from engram.aws.table import cancellation_codes, condition_failed, deserialize, serialize
from engram.stores.memories import MemoryStore, owner_pk

# SQS keeps a message 4 days, the DLQ 14; a redrive from the DLQ must still find the marker.
MARKER_TTL_S = 15 * 86400


class AlreadyExtracted(Exception):
    """The run's extraction already committed: a redelivered job."""

    def __init__(self, marker: dict[str, Any]):
        super().__init__("already extracted")
        self.marker = marker


class ExtractionBusy(Exception):
    """Another delivery of the same job holds the marker's lease right now."""


class LeaseLost(Exception):
    """This attempt's lease ran out and another attempt took the marker over."""


class RowsChanged(Conflict):
    """A memory row changed between the read and the commit (the job is retried)."""


@dataclass(frozen=True)
class Claim:
    attempt_id: str
    attempt: int  # 1 for the first delivery


@dataclass(frozen=True)
class RowWrite:
    """One memory row to put: `expect_updated_at` None means it must not exist yet."""

    memory: Memory
    owner_id: str
    expect_updated_at: str | None


class ExtractionStore:
    def __init__(self, memories: MemoryStore):
        self.memories = memories
        self.table = memories.table

    @property
    def client(self) -> Any:
        return self.table.client

    def _marker_key(self, t: str, agent_id: str, run_id: str) -> dict[str, Any]:
        return serialize({"PK": keys.agent_pk(t, agent_id), "SK": keys.extract_marker_sk(run_id)})

    # --- the marker -----------------------------------------------------------------------------
    def claim(self, t: str, agent_id: str, run_id: str, *, attempt_id: str, lease_s: float) -> Claim:
        now = int(time.time())
        try:
            out = self.client.update_item(
                TableName=self.table.name,
                Key=self._marker_key(t, agent_id, run_id),
                UpdateExpression=(
                    "SET #st = :running, attemptId = :attempt, leaseUntil = :until, runId = :run, "
                    "updatedAt = :iso, expiresAt = :exp ADD attempts :one"
                ),
                ConditionExpression="attribute_not_exists(PK) OR (#st = :running AND leaseUntil < :now)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize(
                    {
                        ":running": "running",
                        ":attempt": attempt_id,
                        ":until": now + int(lease_s) + 1,
                        ":run": run_id,
                        ":iso": now_iso(),
                        ":exp": now + MARKER_TTL_S,
                        ":one": 1,
                        ":now": now,
                    }
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                old = deserialize(err.response.get("Item") or {})
                if old.get("status") == "done":
                    raise AlreadyExtracted(old) from None
                raise ExtractionBusy("another delivery of this job is running") from None
            raise
        return Claim(attempt_id=attempt_id, attempt=int(deserialize(out["Attributes"]).get("attempts", 1)))

    def release(self, t: str, agent_id: str, run_id: str, claim: Claim) -> None:
        """After a failure: the next delivery may claim at once instead of waiting out the lease."""
        try:
            self.client.update_item(
                TableName=self.table.name,
                Key=self._marker_key(t, agent_id, run_id),
                UpdateExpression="SET leaseUntil = :zero",
                ConditionExpression="attemptId = :attempt AND #st = :running",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({":zero": 0, ":attempt": claim.attempt_id, ":running": "running"}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def get_marker(self, t: str, agent_id: str, run_id: str) -> dict[str, Any] | None:
        return self.table._get(keys.agent_pk(t, agent_id), keys.extract_marker_sk(run_id))

    # --- reads ----------------------------------------------------------------------------------
    def live_rows(self, t: str, scope: str, owner_id: str, *, limit: int, session_id: str) -> list[Memory]:
        """The owner's live rows, best first (pinned > importance > recent): one bounded Query."""
        return self.memories.top_memories(t, scope, owner_id, limit=limit, session_id=session_id)

    def get_rows(self, t: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        if not wanted:
            return {}
        unique = {mid: (scope, owner) for scope, owner, mid in wanted}
        request = {
            self.table.name: {
                "Keys": [serialize({"PK": owner_pk(t, scope, owner), "SK": keys.memory_sk(mid)}) for mid, (scope, owner) in unique.items()],
                "ConsistentRead": True,
            }
        }
        found: dict[str, Memory] = {}
        for attempt in range(6):
            out = self.client.batch_get_item(RequestItems=request)
            for item in out.get("Responses", {}).get(self.table.name, []):
                m = Memory.model_validate(deserialize(item))
                found[m.id] = m
            request = out.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        return found

    # --- the commit -----------------------------------------------------------------------------
    def commit(
        self,
        t: str,
        agent_id: str,
        run_id: str,
        claim: Claim,
        *,
        outcome: dict[str, Any],
        usage: UsageRow | None,
        rows: list[RowWrite],
    ) -> None:
        """Marker `done` + usage row + memory rows, all or nothing (at most 1 + 1 + 15 items)."""
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": self._marker_key(t, agent_id, run_id),
                    "UpdateExpression": "SET #st = :done, outcome = :outcome, updatedAt = :iso REMOVE leaseUntil",
                    "ConditionExpression": "attemptId = :attempt AND #st = :running",
                    "ExpressionAttributeNames": {"#st": "status"},
                    "ExpressionAttributeValues": serialize(
                        {":done": "done", ":outcome": outcome, ":iso": now_iso(), ":attempt": claim.attempt_id, ":running": "running"}
                    ),
                }
            }
        ]
        if usage is not None:
            items.append({"Put": {"TableName": self.table.name, "Item": serialize(self.table._usage_item(t, usage))}})
        for row in rows:
            put: dict[str, Any] = {"TableName": self.table.name, "Item": serialize(self.memories._memory_item(t, row.memory, row.owner_id))}
            if row.expect_updated_at is None:
                put["ConditionExpression"] = "attribute_not_exists(PK)"
            else:
                put["ConditionExpression"] = "updatedAt = :seen"
                put["ExpressionAttributeValues"] = serialize({":seen": row.expect_updated_at})
            items.append({"Put": put})
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as err:
            codes = cancellation_codes(err)
            if codes and codes[0] == "ConditionalCheckFailed":
                raise LeaseLost("the extraction marker was taken over by another attempt") from None
            if "ConditionalCheckFailed" in codes:
                raise RowsChanged("a memory row changed while the extraction ran", code="memory_changed") from None
            raise

    def put_usage(self, t: str, usage: UsageRow) -> None:
        """A model call whose results could not be committed still cost money: record it alone."""
        self.client.put_item(TableName=self.table.name, Item=serialize(self.table._usage_item(t, usage)))
