"""What the extraction worker reads and writes in the single table.

Idempotency per run: a marker item `EXTRACT#<runId>` in the agent's partition. A job claims it
with one conditional UpdateItem (absent, or a lease that has run out); everything the job stores
(auto rows, superseded rows, its usage row) commits in ONE transaction that also flips the marker
to `done`, conditional on this attempt still holding it. So a redelivered job finds `done` and
stores nothing, and a job that died half-way stored nothing and is simply run again.
"""

from __future__ import annotations

import time
from typing import Any

from engram.aws import keys
from engram.aws.table import ConditionFailed, Table
from engram.extraction.models import AlreadyExtracted, Claim, ExtractionBusy, LeaseLost, RowsChanged, RowWrite
from engram.kernel.model import now_iso
from engram.memory.models import Memory
from engram.memory.repository import MemoryRepository
from engram.usage.models import UsageRow
from engram.usage.repository import UsageRepository

# SQS keeps a message 4 days, the DLQ 14; a redrive from the DLQ must still find the marker.
MARKER_TTL_S = 15 * 86400


class ExtractionStore:
    def __init__(self, table: Table, memories: MemoryRepository | None = None, usage: UsageRepository | None = None):
        self.table = table
        self.memories = memories or MemoryRepository(table)
        self.usage = usage or UsageRepository(table)

    # --- the marker -----------------------------------------------------------------------------
    def claim(self, t: str, agent_id: str, run_id: str, *, attempt_id: str, lease_s: float) -> Claim:
        now = int(time.time())
        try:
            item = self.table.update(
                keys.agent_pk(t, agent_id),
                keys.extract_marker_sk(run_id),
                "SET #st = :running, attemptId = :attempt, leaseUntil = :until, runId = :run, "
                "updatedAt = :iso, expiresAt = :exp ADD attempts :one",
                condition="attribute_not_exists(PK) OR (#st = :running AND leaseUntil < :now)",
                names={"#st": "status"},
                values={
                    ":running": "running",
                    ":attempt": attempt_id,
                    ":until": now + int(lease_s) + 1,
                    ":run": run_id,
                    ":iso": now_iso(),
                    ":exp": now + MARKER_TTL_S,
                    ":one": 1,
                    ":now": now,
                },
                old_on_failure=True,
            )
        except ConditionFailed as err:
            if (err.item or {}).get("status") == "done":
                raise AlreadyExtracted(err.item or {}) from None
            raise ExtractionBusy("another delivery of this job is running") from None
        return Claim(attempt_id=attempt_id, attempt=int(item.get("attempts", 1)))

    def release(self, t: str, agent_id: str, run_id: str, claim: Claim) -> None:
        """After a failure: the next delivery may claim at once instead of waiting out the lease."""
        try:
            self.table.update(
                keys.agent_pk(t, agent_id),
                keys.extract_marker_sk(run_id),
                "SET leaseUntil = :zero",
                condition="attemptId = :attempt AND #st = :running",
                names={"#st": "status"},
                values={":zero": 0, ":attempt": claim.attempt_id, ":running": "running"},
            )
        except ConditionFailed:
            pass  # another attempt holds it now

    # --- reads ----------------------------------------------------------------------------------
    def live_rows(self, t: str, scope: str, owner_id: str, *, limit: int, session_id: str) -> list[Memory]:
        """The owner's live rows, best first (pinned > importance > recent): one bounded Query."""
        return self.memories.top(t, scope, owner_id, limit=limit, session_id=session_id)

    def get_rows(self, t: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        return self.memories.get_many(t, wanted) if wanted else {}

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
        ops = [
            self.table.update_op(
                keys.agent_pk(t, agent_id),
                keys.extract_marker_sk(run_id),
                "SET #st = :done, outcome = :outcome, updatedAt = :iso REMOVE leaseUntil",
                condition="attemptId = :attempt AND #st = :running",
                names={"#st": "status"},
                values={
                    ":done": "done",
                    ":outcome": outcome,
                    ":iso": now_iso(),
                    ":attempt": claim.attempt_id,
                    ":running": "running",
                },
            )
        ]
        if usage is not None:
            ops.append(self.table.put_op(self.usage.item(t, usage)))
        for row in rows:
            item = self.memories.item(t, row.memory, row.owner_id)
            if row.expect_updated_at is None:
                ops.append(self.table.put_op(item, condition="attribute_not_exists(PK)"))
            else:
                ops.append(self.table.put_op(item, condition="updatedAt = :seen", values={":seen": row.expect_updated_at}))
        try:
            self.table.transact(ops)
        except ConditionFailed as err:
            if err.failed_at(0):
                raise LeaseLost("the extraction marker was taken over by another attempt") from None
            raise RowsChanged("a memory row changed while the extraction ran", code="memory_changed") from None

    def put_usage(self, t: str, usage: UsageRow) -> None:
        """A model call whose results could not be committed still cost money: record it alone."""
        self.usage.put(t, usage)
