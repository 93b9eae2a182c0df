"""Decisions on held tool calls (TL10): one conditional update of the run record each."""

from __future__ import annotations

from engram.aws import keys
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import Conflict
from engram.kernel.model import now_iso
from engram.runs.models import Run


class ApprovalRepository:
    def __init__(self, table: Table):
        self.table = table

    def decide(self, tenant: str, run: Run, index: int, decision: dict[str, object], *, stale_at: int) -> Run:
        sets = [f"pendingApprovals[{index}].{name} = :{name}" for name in decision]
        try:
            item = self.table.update(
                keys.tenant_pk(tenant),
                keys.run_sk(run.id),
                "SET " + ", ".join([*sets, "updatedAt = :at", "GSI3SK = :stale"]),
                condition=(
                    f"#s = :awaiting AND pendingApprovals[{index}].toolUseId = :id"
                    f" AND attribute_not_exists(pendingApprovals[{index}].decision)"
                ),
                names={"#s": "status"},
                values={
                    **{f":{name}": value for name, value in decision.items()},
                    ":at": now_iso(),
                    ":stale": f"{stale_at:012d}#{run.id}",  # the open-run index: when the sweeper looks again
                    ":awaiting": "awaiting_approval",
                    ":id": run.pending_approvals[index]["toolUseId"],
                },
            )
        except ConditionFailed:
            mine = self._decided_as(tenant, run.id, index, decision)
            if mine is not None:  # a retry after a lost answer met its own decision: it stands
                return mine
            raise Conflict(
                "this tool call was decided already, or the run is no longer waiting for approval",
                field="toolUseId",
                code="already_decided",
            ) from None
        return Run.model_validate(item)

    def _decided_as(self, tenant: str, run_id: str, index: int, decision: dict[str, object]) -> Run | None:
        """The run, when its approval `index` holds exactly `decision` (this very write landed)."""
        item = self.table.get(keys.tenant_pk(tenant), keys.run_sk(run_id))
        run = Run.model_validate(item) if item else None
        if run is None or index >= len(run.pending_approvals):
            return None
        held = run.pending_approvals[index]
        return run if all(held.get(name) == value for name, value in decision.items()) else None
