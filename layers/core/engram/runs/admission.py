"""A queued turn's admission (ST4, ST7): the run, its clientTurnId claim and its slot under the
user's cap of active turns, written in one transaction; split from runs.repository (the run records)."""

from __future__ import annotations

import time

from engram.aws import keys
from engram.aws.table import Cancelled, ConditionFailed, Table, backoff
from engram.kernel.errors import Conflict, StorageUnavailable, aws_unavailable
from engram.runs.models import Run
from engram.runs.repository import RunRepository

# --- a queued turn's admission (ST4, ST7) ---------------------------------------------------------
# PK <t> SK ACTIVETURN#<runId>: a turn queued or running (TTL `expiresAt`); the clientTurnId claim
# (keys.stream_client_turn_sk) names its run. Written with the run in one transaction.
_CLAIM_TRIES = 6  # a clientTurnId's claim colliding with a concurrent one
_CLAIMABLE = "attribute_not_exists(PK) OR expiresAt <= :now"


class TurnAdmissionRepository:
    def __init__(self, table: Table, runs: RunRepository):
        self.table, self.runs = table, runs

    def create_turn(self, tenant: str, run: Run, *, client_turn_id: str | None, ttl_s: int, counted: bool = True) -> Run | None:
        """Records a queued turn in one transaction (ST4, ST7): its run, its row among the tenant's
        active turns (until the worker ends it, or the run would be stale), and the claim of the
        client's id of the turn (scoped to the run's agent and session) when there is one, so a
        concurrent resend either wins all of them or finds the claim and, beside it, the run it
        names. None: written; else the earlier claim's run. A transaction that collides with the
        other one (TransactionConflict) is tried again."""
        pk = keys.tenant_pk(tenant)
        pauses = backoff(0.02, 0.5)
        for attempt in range(_CLAIM_TRIES):
            now = int(time.time())
            ops = [self.table.put_op(self.runs.item(tenant, run), condition="attribute_not_exists(PK)")]
            if counted:  # a queued turn holds a slot of the tenant's cap until the worker ends it (ST7)
                active = {"PK": pk, "SK": keys.active_turn_sk(run.id), "expiresAt": now + self.runs.stale_after(run.kind) + 60}
                ops.append(self.table.put_op(active))
            if client_turn_id:
                claim = {"PK": pk, "SK": self._claim_sk(run, client_turn_id), "runId": run.id, "expiresAt": now + ttl_s}
                ops.insert(0, self.table.put_op(claim, condition=_CLAIMABLE, values={":now": now}))
            try:
                # a lost response's retry (same token) is answered, not refused
                token = f"{run.id}-{attempt}"[-36:]
                try:
                    self.table.transact(ops, token=token)
                except Exception as err:
                    if not aws_unavailable(err):
                        raise
                    self.table.transact(ops, token=token)  # no answer: the same request again tells
                return None
            except ConditionFailed as err:
                if not client_turn_id or not err.failed_at(0):
                    raise
                found = self.claimed(tenant, run, client_turn_id)
                if found is not None:
                    return found
            except Cancelled:
                pass  # the other claimant's transaction was in flight: try again, it decides
            time.sleep(next(pauses))
        raise StorageUnavailable("the turn could not be recorded; send it again with the same clientTurnId")

    @staticmethod
    def _claim_sk(run: Run, client_turn_id: str) -> str:
        return keys.stream_client_turn_sk(run.agent_id, run.session_id or "", client_turn_id)

    def claimed(self, tenant: str, run: Run, client_turn_id: str) -> Run | None:
        """The run a live claim of `client_turn_id` on `run`'s agent and session names; None if
        there is no such claim. A claim whose run is gone is a 409."""
        earlier = self.table.get(keys.tenant_pk(tenant), self._claim_sk(run, client_turn_id))
        if not earlier or int(earlier.get("expiresAt", 0)) <= time.time():
            return None
        found = self.runs.get(tenant, str(earlier["runId"]))
        if found is None:
            raise Conflict(
                "this clientTurnId named a turn whose run is gone; send the turn with a new clientTurnId",
                field="clientTurnId",
            )
        return found

    def active_turns(self, tenant: str) -> int:
        """The tenant's turns queued or running (their rows not yet ended nor expired)."""
        now = time.time()
        rows = self.table.query_all(keys.tenant_pk(tenant), sk_prefix=keys.ACTIVE_TURN_PREFIX)
        return sum(1 for r in rows if int(r.get("expiresAt", 0)) > now)

    def end_turn(self, tenant: str, run_id: str) -> None:
        """The turn no longer counts against the tenant's cap (it ended, or was never queued)."""
        self.table.delete(keys.tenant_pk(tenant), keys.active_turn_sk(run_id))

    def _delete_queued_op(self, tenant: str, run_id: str) -> dict[str, object]:
        op = self.table.delete_op(
            keys.tenant_pk(tenant), keys.run_sk(run_id), condition="#s = :queued", values={":queued": "queued"}
        )
        inner = op["Delete"]
        assert isinstance(inner, dict)
        inner["ExpressionAttributeNames"] = {"#s": "status"}  # status is a reserved word
        return op

    def drop_claim(self, tenant: str, run: Run, *, client_turn_id: str) -> None:
        pk = keys.tenant_pk(tenant)
        claim_sk = keys.stream_client_turn_sk(run.agent_id, run.session_id or "", client_turn_id)
        try:
            self.table.transact(
                [
                    self.table.delete_op(pk, claim_sk, condition="runId = :run", values={":run": run.id}),
                    self._delete_queued_op(tenant, run.id),
                ],
                token=f"drop-{run.id}"[-36:],
            )
        except ConditionFailed:
            pass  # the run started after all, or another send holds the claim: it stands
