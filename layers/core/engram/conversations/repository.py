"""Session rows (in the agent's partition) and the lease that serialises a session's turns."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table, backoff
from engram.conversations.models import RunningSummary, Session, SessionState
from engram.kernel.errors import Conflict, NotFound, SessionBusy
from engram.kernel.ids import DASHBOARD, new_id
from engram.kernel.model import now_iso

_UNLEASED = "attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)"
# Free for a turn: no live lease, and no run waiting for its owner's approval (TL10) unless it is the
# taker. (A waiting session may be deleted: its run then fails when it resumes.)
_FREE = _UNLEASED + " AND (attribute_not_exists(awaitingRunId) OR awaitingRunId = :run)"


def approval_pending(run_id: str) -> Conflict:
    """A new turn on a session whose turn waits for its owner's approval (TL10): refused, not queued."""
    err = Conflict(
        f"this session's turn is waiting for approval of a tool call (run {run_id}); decide it with "
        f"POST /api/runs/{run_id}/approvals, then send the message again",
        field="sessionId",
        code="approval_pending",
    )
    err.run_id = run_id
    return err


def _now() -> int:
    """The leases' clock (epoch seconds); tests replace it."""
    return int(time.time())


class SessionRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, tenant: str, session: Session) -> dict[str, object]:
        return {
            "PK": keys.agent_pk(tenant, session.agent_id),
            "SK": keys.session_sk(session.id),
            **session.model_dump(by_alias=True),
        }

    def dashboard_item(self, tenant: str, agent_id: str, now: str) -> dict[str, Any]:
        return self.item(tenant, Session(id=DASHBOARD, agent_id=agent_id, created_at=now, updated_at=now, title="Dashboard"))

    def create(self, tenant: str, session: Session, *, limit: int, if_absent_ok: bool = False) -> bool:
        """Creates a session of an existing agent, within the agent's `limit` of sessions; False
        when it already existed and if_absent_ok."""
        try:
            quotas.create_within(
                self.table,
                [
                    self.table.put_op(self.item(tenant, session), condition="attribute_not_exists(PK)"),
                    self.table.check_op(keys.tenant_pk(tenant), keys.agent_sk(session.agent_id)),
                ],
                quotas.sessions(tenant, session.agent_id, limit),
            )
        except ConditionFailed as err:
            if err.failed_at(1):
                raise NotFound("agent not found", field="agentId") from None
            if if_absent_ok:
                return False
            raise Conflict(f"session {session.id} already exists", field="id", code="session_exists") from None
        return True

    def get(self, tenant: str, agent_id: str, session_id: str) -> dict[str, object] | None:
        return self.table.get(keys.agent_pk(tenant, agent_id), keys.session_sk(session_id))

    def state(self, tenant: str, agent_id: str, session_id: str) -> SessionState | None:
        item = self.get(tenant, agent_id, session_id)
        return None if item is None else SessionState.of(item)

    def page(self, tenant: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Session], str | None]:
        items, nxt = self.table.query(keys.agent_pk(tenant, agent_id), sk_prefix="SESSION#", limit=limit, token=token)
        return [Session.model_validate(i) for i in items], nxt

    def delete(self, tenant: str, agent_id: str, session_id: str) -> None:
        """Refused while a turn holds the session, so a running turn cannot resurrect it."""
        delete = self.table.delete_op(
            keys.agent_pk(tenant, agent_id), keys.session_sk(session_id), condition=_UNLEASED, values={":now": _now()}
        )
        try:
            quotas.delete_releasing(self.table, quotas.sessions(tenant, agent_id), [delete])
        except ConditionFailed:
            if self.get(tenant, agent_id, session_id):
                raise SessionBusy("a turn is running on this session; try again when it ends", field="sessionId") from None
            raise NotFound("session not found", field="sessionId") from None

    # --- the lease ------------------------------------------------------------------------------
    def acquire_lease(self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float) -> SessionState:
        """Takes the session for one turn (or run, or reset); returns its state."""
        now = _now()
        try:
            item = self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.session_sk(session_id),
                "SET leaseOwner = :run, leaseUntil = :until",
                condition=_FREE,
                values={":run": owner, ":until": now + int(ttl_s) + 1, ":now": now},
                old_on_failure=True,
            )
        except ConditionFailed as err:
            if err.item and err.item.get("awaitingRunId") not in (None, owner):
                raise approval_pending(str(err.item["awaitingRunId"])) from None
            if err.item:
                raise SessionBusy("another turn is running on this session", field="sessionId") from None
            raise NotFound("session not found", field="sessionId") from None
        return SessionState.of(item)

    def wait_for_lease(
        self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float, wait_s: float, busy_message: str
    ) -> SessionState:
        """acquire_lease, waiting up to `wait_s` (with backoff) while another turn, run or reset
        holds the session; then SessionBusy with `busy_message`."""
        give_up = time.monotonic() + wait_s
        pauses = backoff(0.05, 0.5)
        while True:
            try:
                return self.acquire_lease(tenant, agent_id, session_id, owner, ttl_s)
            except SessionBusy:
                pause = next(pauses)
                if time.monotonic() + pause > give_up:
                    raise SessionBusy(busy_message, field="sessionId") from None
                time.sleep(pause)

    def renew_lease(self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float) -> bool:
        """Extends a lease this owner holds to `ttl_s` from now; False when it is not held any more."""
        return self._as_owner(tenant, agent_id, session_id, owner, "SET leaseUntil = :until", {":until": _now() + int(ttl_s) + 1})

    def release_lease(self, tenant: str, agent_id: str, session_id: str, owner: str) -> None:
        self._as_owner(tenant, agent_id, session_id, owner, "REMOVE leaseOwner, leaseUntil")  # not ours: nothing to release

    def _as_owner(
        self, tenant: str, agent_id: str, session_id: str, owner: str, expression: str, values: Mapping[str, object] | None = None
    ) -> bool:
        """An update of the session's lease, applied only while `owner` holds it (False otherwise)."""
        try:
            self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.session_sk(session_id),
                expression,
                condition="leaseOwner = :run",
                values={":run": owner, **(values or {})},
            )
        except ConditionFailed:
            return False
        return True

    def commit_op(
        self, tenant: str, agent_id: str, session_id: str, owner: str, changes: Mapping[str, object] | None, now: str
    ) -> dict[str, object]:
        """A turn's commit, as one operation of its transaction: the counters it changes (a
        successful turn) and the release of its lease, conditional on still holding it."""
        # contextStartedAt: the first commit since the session's last Active Memory reset (the
        # panel's session age); a reset removes it.
        sets = ["updatedAt = :now", "contextStartedAt = if_not_exists(contextStartedAt, :now)"] if changes else []
        values: dict[str, Any] = {":run": owner}
        if changes:
            values[":now"] = now
            for i, (attr, value) in enumerate(changes.items()):
                sets.append(f"{attr} = :s{i}")
                values[f":s{i}"] = value
        # A turn that paused for approvals (TL10) and now ends frees the session for the next one.
        expression = ("SET " + ", ".join(sets) + " " if sets else "") + "REMOVE leaseOwner, leaseUntil, awaitingRunId"
        return self.table.update_op(
            keys.agent_pk(tenant, agent_id), keys.session_sk(session_id), expression, condition="leaseOwner = :run", values=values
        )

    def pause_op(self, tenant: str, agent_id: str, session_id: str, owner: str) -> dict[str, object]:
        """A paused turn (TL10): the session waits for its run's approvals, with no lease held."""
        return self.table.update_op(
            keys.agent_pk(tenant, agent_id),
            keys.session_sk(session_id),
            "SET awaitingRunId = :run REMOVE leaseOwner, leaseUntil",
            condition="leaseOwner = :run",
            values={":run": owner},
        )

    def clear_awaiting(self, tenant: str, agent_id: str, session_id: str, run_id: str) -> None:
        """A paused run that will never resume (it failed): its session takes turns again."""
        try:
            self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.session_sk(session_id),
                "REMOVE awaitingRunId",
                condition="awaitingRunId = :run",
                values={":run": run_id},
            )
        except ConditionFailed:
            pass  # not waiting for this run any more

    def store_summary(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        summary: RunningSummary,
        *,
        was: RunningSummary | None,
        reset_at: str | None,
    ) -> bool:
        """Sets the session's running summary (CM8) if it is still `was` (the summary the worker
        read, None for none) and no Active Memory reset happened since `reset_at`; False if not.
        No lease: a turn's commit never writes the summary, so the two cannot overwrite each other."""
        conditions = ["attribute_exists(PK)"]
        values: dict[str, Any] = {":summary": summary.item()}
        if was is None:
            conditions.append("attribute_not_exists(summary)")
        else:
            conditions.append("summary.through = :through AND summary.updatedAt = :updated")
            values |= {":through": was.through, ":updated": was.updated_at}
        if reset_at is None:
            conditions.append("attribute_not_exists(lastResetAt)")
        else:
            conditions.append("lastResetAt = :reset")
            values[":reset"] = reset_at
        try:
            self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.session_sk(session_id),
                "SET summary = :summary",
                condition=" AND ".join(conditions),
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def reset_context(self, tenant: str, agent_id: str, session_id: str, *, wait_s: float) -> dict[str, object]:
        """Active Memory reset: the model's context starts after the messages the session holds now
        (they stay in the transcript); the run counter restarts; the running summary is dropped
        and nothing cut before the reset is summarised again (`summaryFrom`). Taken under the session's lease,
        waiting for a turn or run that holds it, so a reset is never lost under a finishing run."""
        owner = new_id("reset")
        self.wait_for_lease(
            tenant,
            agent_id,
            session_id,
            owner,
            10,
            wait_s,
            "a run is using the agent's main session; retry the reset when it finishes",
        )
        try:
            return self.table.update(
                keys.agent_pk(tenant, agent_id),
                keys.session_sk(session_id),
                "SET contextFrom = if_not_exists(messageCount, :zero), revisionAtReset = if_not_exists(revision, :zero), "
                "runsSinceReset = :zero, lastResetAt = :now, summaryFrom = if_not_exists(trimmedCount, :zero) "
                "REMOVE leaseOwner, leaseUntil, summary, contextStartedAt",
                condition="leaseOwner = :token",
                values={":zero": 0, ":now": now_iso(), ":token": owner},
            )
        except ConditionFailed:
            raise SessionBusy("the session lease was lost during the reset; retry", field="sessionId") from None
