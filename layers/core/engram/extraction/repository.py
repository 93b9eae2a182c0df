"""What the extraction worker reads and writes in the single table.

Idempotency per run: a marker item `EXTRACT#<runId>` in the agent's partition. A job claims it
with one conditional UpdateItem (absent, or a lease that has run out); everything the job stores
(auto rows, superseded rows, its usage row) commits in ONE transaction that also flips the marker
to `done`, conditional on this attempt still holding it. So a redelivered job finds `done` and
stores nothing, and a job that died half-way stored nothing and is simply run again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.extraction.models import AlreadyExtracted, Claim, ExtractionBusy, LeaseLost, RowsChanged, RowWrite
from engram.kernel.model import now_iso
from engram.memory.models import Memory
from engram.memory.repository import MemoryRepository
from engram.usage.models import UsageRow
from engram.usage.repository import UsageRepository

# SQS keeps a message 4 days, the DLQ 14; a redrive from the DLQ must still find the marker.
MARKER_TTL_S = 15 * 86400


class ExtractionRepository:
    def __init__(self, table: Table, memories: MemoryRepository | None = None, usage: UsageRepository | None = None):
        self.table = table
        self.memories = memories or MemoryRepository(table)
        self.usage = usage or UsageRepository(table)

    # --- the marker -----------------------------------------------------------------------------
    def claim(self, tenant: str, agent_id: str, run_id: str, *, attempt_id: str, lease_s: float) -> Claim:
        now = int(time.time())
        try:
            item = self.table.update(
                keys.agent_pk(tenant, agent_id),
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

    def release(self, tenant: str, agent_id: str, run_id: str, claim: Claim) -> None:
        """After a failure: the next delivery may claim at once instead of waiting out the lease."""
        try:
            self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.extract_marker_sk(run_id),
                "SET leaseUntil = :zero",
                condition="attemptId = :attempt AND #st = :running",
                names={"#st": "status"},
                values={":zero": 0, ":attempt": claim.attempt_id, ":running": "running"},
            )
        except ConditionFailed:
            pass  # another attempt holds it now

    # --- reads ----------------------------------------------------------------------------------
    def live_rows(self, tenant: str, scope: str, owner_id: str, *, limit: int, session_id: str) -> list[Memory]:
        """The owner's live rows, best first (pinned > importance > recent): one bounded Query."""
        return self.memories.top(tenant, scope, owner_id, limit=limit, session_id=session_id)

    def get_rows(self, tenant: str, wanted: list[tuple[str, str, str]]) -> dict[str, Memory]:
        """(scope, owner, memoryId) -> the stored row (archived ones too), by id; one BatchGetItem."""
        return self.memories.get_many(tenant, wanted) if wanted else {}

    # --- the commit -----------------------------------------------------------------------------
    def commit(
        self,
        tenant: str,
        agent_id: str,
        run_id: str,
        claim: Claim,
        *,
        outcome: Mapping[str, object],
        usage: UsageRow | None,
        rows: list[RowWrite],
        memory_limit: int,
    ) -> list[RowWrite]:
        """Marker `done` + usage row + memory rows, all or nothing (at most 1 + 1 + 15 items + a
        quota claim per owner). New rows claim room in their owner's memory quota in the same
        transaction; those that do not fit are left out and returned: a full quota never fails
        an extraction, it stores less."""
        left_out: list[RowWrite] = []
        totals = self.usage.totals_ops(tenant, [usage], kind="extraction") if usage is not None else []
        for _ in range(3):
            marker = {**outcome, "leftOut": len(left_out)} if left_out else outcome
            ops = [self._marker_op(tenant, agent_id, run_id, claim, marker)]
            if usage is not None:
                ops.append(self.table.put_op(self.usage.item(tenant, usage)))
            ops += [self._row_op(tenant, row) for row in rows]
            new_rows: dict[tuple[str, str], int] = {}
            for row in rows:
                if row.expect_updated_at is None:
                    of: tuple[str, str] = (row.memory.scope, row.owner_id)
                    new_rows[of] = new_rows.get(of, 0) + 1
            owners = list(new_rows)
            counted = [self.memories.quota(tenant, scope, owner_id, memory_limit) for scope, owner_id in owners]
            claims = [quotas.claim_op(self.table, q, new_rows[o]) for q, o in zip(counted, owners, strict=True)]
            try:
                # The totals go last: the failed-condition indexes above stay as they were.
                self.table.transact([*ops, *claims, *totals])
                return left_out
            except ConditionFailed as err:
                if any(err.failed_at(i) for i in range(len(ops))) or not any(
                    err.failed_at(len(ops) + i) for i in range(len(owners))
                ):
                    if err.failed_at(0):
                        raise LeaseLost("the extraction marker was taken over by another attempt") from None
                    raise RowsChanged("a memory row changed while the extraction ran", code="memory_changed") from None
                full = {owners[i]: counted[i] for i in range(len(owners)) if err.failed_at(len(ops) + i)}
            for owner, quota in full.items():
                room = quotas.room(self.table, quota)
                fitting: list[RowWrite] = []
                for row in rows:
                    if row.expect_updated_at is None and (row.memory.scope, row.owner_id) == owner:
                        if room <= 0:
                            left_out.append(row)
                            continue
                        room -= 1
                    fitting.append(row)
                rows = fitting
        raise RowsChanged("the memory quota kept changing while the extraction committed", code="memory_changed")

    def _marker_op(
        self, tenant: str, agent_id: str, run_id: str, claim: Claim, outcome: Mapping[str, object]
    ) -> dict[str, object]:
        return self.table.update_op(
            keys.agent_pk(tenant, agent_id),
            keys.extract_marker_sk(run_id),
            "SET #st = :done, outcome = :outcome, updatedAt = :iso REMOVE leaseUntil",
            condition="attemptId = :attempt AND #st = :running",
            names={"#st": "status"},
            values={":done": "done", ":outcome": outcome, ":iso": now_iso(), ":attempt": claim.attempt_id, ":running": "running"},
        )

    def _row_op(self, tenant: str, row: RowWrite) -> dict[str, object]:
        item = self.memories.item(tenant, row.memory, row.owner_id)
        if row.expect_updated_at is None:
            return self.table.put_op(item, condition="attribute_not_exists(PK)")
        return self.table.put_op(item, condition="updatedAt = :seen", values={":seen": row.expect_updated_at})

    def put_usage(self, tenant: str, usage: UsageRow) -> None:
        """A model call whose results could not be committed still cost money: record it alone
        (with its totals, once)."""
        self.usage.record(tenant, usage, kind="extraction")
