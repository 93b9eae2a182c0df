"""TL10: deciding a tool call held for its owner's approval, and the sweep that expires undecided
requests and sends a lost resumption again (the resumption itself: approvals.resume).

A decision is one conditional write on the run (a second one is a 409). When every held call is
decided, a resume job goes on the turn queue (a chat turn, in its session's FIFO group) or the run
queue (a heartbeat, manual run or re-examination, whose plan the heartbeat function rebuilds);
delivery is at least once, so the worker claims the resumption with a conditional write first:
a redelivered job finds it claimed, and an approved tool runs at most once. If the job is lost
after the decision landed, the sweeper (every 5 minutes, over the open-run index where a waiting
run's stale time is its first request's expiry, or a short grace once all are decided) sends it
again; an undecided request past its expiry is denied (`decidedBy: expired`) and the turn resumes.
A council's lead waiting for its members is settled again (runs.council_wait).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from engram.approvals.models import ApprovalIn, ResumeJob
from engram.kernel.errors import Conflict, NotFound
from engram.kernel.ids import check_id
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.runs.models import APPROVAL_EXPIRED, Run, approvals_stale_at

if TYPE_CHECKING:
    from engram.approvals.ports import Approvals
    from engram.conversations.ports import Sessions
    from engram.kernel.ports import JobQueues
    from engram.runs.ports import Runs


def expired_at(approval: dict[str, object], now: datetime) -> bool:
    expires = str(approval.get("expiresAt") or "")
    return bool(expires) and datetime.fromisoformat(expires.replace("Z", "+00:00")) <= now


def undecided(run: Run) -> list[dict[str, object]]:
    return [p for p in run.pending_approvals if "decision" not in p]


def decide(
    runs: Runs, approvals: Approvals, queues: JobQueues, tenant: str, decided_by: str, run_id: str, body: ApprovalIn
) -> Run:
    """The owner's decision on one held call (the run is looked up in the caller's own records:
    another user's run is a 404). When it was the last one undecided, the turn's resumption is sent."""
    run = runs.get(tenant, check_id("runId", run_id))
    if run is None:
        raise NotFound("run not found", field="runId")
    index = next((i for i, p in enumerate(run.pending_approvals) if p.get("toolUseId") == body.tool_use_id), None)
    if index is None and run.waiting_for:  # a council's lead: the held calls are its members'
        raise NotFound(
            f"this run holds no tool call for approval: it waits for its council members' runs {', '.join(run.waiting_for)}; "
            "decide on theirs",
            field="runId",
            code="approval_not_found",
        )
    if index is None:
        raise NotFound(
            f"this run holds no tool call {body.tool_use_id} for approval", field="toolUseId", code="approval_not_found"
        )
    held = run.pending_approvals[index]
    if "decision" in held or run.status != "awaiting_approval":
        raise Conflict(
            f"tool call {body.tool_use_id} was decided already ({held.get('decision', 'the run went on')})",
            field="toolUseId",
            code="already_decided",
        )
    if expired_at(held, datetime.now(UTC)):
        raise Conflict(
            f"the approval of tool call {body.tool_use_id} expired at {held['expiresAt']}; it counts as denied",
            field="toolUseId",
            code="approval_expired",
        )
    decision: dict[str, object] = {"decision": body.decision, "decidedBy": decided_by, "decidedAt": now_iso()}
    if body.note:
        decision["note"] = body.note
    after = [({**p, **decision} if i == index else p) for i, p in enumerate(run.pending_approvals)]
    updated = approvals.decide(tenant, run, index, decision, stale_at=approvals_stale_at(after, now=int(time.time())))
    metrics.add_metric(name="ApprovalDecided", unit=MetricUnit.Count, value=1)
    if not undecided(updated):
        send_resume(queues, tenant, updated)
    return updated


def send_resume(queues: JobQueues, tenant: str, run: Run) -> bool:
    """The resume job of a run whose held calls are all decided; a failure is logged, not raised:
    the decision stands and the sweeper sends the job again."""
    job = ResumeJob(tenant=tenant, run_id=run.id).body()
    try:
        if run.kind == "chat" and run.session_id:
            # One per pause (a resumed turn may pause again within SQS's 5-minute deduplication window).
            dedup = f"{run.id}-resume-{len(run.pending_approvals)}"
            queues.enqueue_turn(job, group=f"{tenant}#{run.agent_id}#{run.session_id}", dedup_id=dedup)
        else:
            queues.enqueue_run(job)
    except Exception:
        logger.warning("could not send a resume job; the sweeper sends it again", extra={"run_id": run.id}, exc_info=True)
        return False
    return True


def release_session(sessions: Sessions, tenant: str, run: Run) -> None:
    """A paused run that will not resume: its session takes turns again."""
    if run.session_id:
        sessions.clear_awaiting(tenant, run.agent_id, run.session_id, run.id)


def sweep_approvals(
    runs: Runs,
    approvals: Approvals,
    queues: JobQueues,
    *,
    now: int | None = None,
    council: Callable[[str, Run], bool] | None = None,
) -> dict[str, int]:
    """Runs waiting for approvals past their stale time: undecided requests past their expiry are
    denied (`decidedBy: expired`), and a run whose requests are all decided has its resume job sent
    (again, if the first was lost). A council's lead waiting for its members goes to `council`
    (runs.council_wait.sweep_council, bound to its stores by the caller: its continuation sent
    again once none waits)."""
    expired = resent = 0
    at = datetime.fromtimestamp(now, UTC) if now is not None else datetime.now(UTC)
    for tenant, run_id, _seen in runs.stale(now=now):
        run = runs.get(tenant, run_id)
        if run is None or run.status != "awaiting_approval":
            continue
        if run.waiting_for:  # a council's lead: it goes on once none of its members waits (runs.council_wait)
            if council is not None and council(tenant, run):
                resent += 1
            continue
        for index, held in enumerate(run.pending_approvals):
            if "decision" in held or not expired_at(held, at):
                continue
            decision: dict[str, object] = {"decision": "deny", "decidedBy": APPROVAL_EXPIRED, "decidedAt": now_iso()}
            after = [({**p, **decision} if i == index else p) for i, p in enumerate(run.pending_approvals)]
            try:
                run = approvals.decide(tenant, run, index, decision, stale_at=approvals_stale_at(after, now=int(at.timestamp())))
                expired += 1
            except Conflict:
                run = runs.get(tenant, run_id) or run  # decided meanwhile by its owner
        if run.status == "awaiting_approval" and not undecided(run) and send_resume(queues, tenant, run):
            resent += 1
    if expired or resent:
        metrics.add_metric(name="ApprovalsExpired", unit=MetricUnit.Count, value=expired)
    return {"approvalsExpired": expired, "resumesSent": resent}
