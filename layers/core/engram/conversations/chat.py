"""Chat turns that do not run inside the request: `?async=true` and webhooks queue them on the
session's FIFO group; the chat function's queue consumer runs them."""

from __future__ import annotations

import time

from engram.cards.policy import CardPolicy
from engram.conversations.models import Session, TurnJob
from engram.conversations.repository import approval_pending
from engram.engine.turn import TurnOutcome, TurnPlan, TurnPolicy, check_message, run_turn
from engram.extraction.enqueue import ExtractionPolicy
from engram.kernel.errors import Conflict, EngramError, NotFound, SessionBusy, TooManyTurns, TurnFailed
from engram.kernel.ids import new_id
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.recall.policy import TOKEN_NAME, ArchivePolicy
from engram.runs.models import Run
from engram.runs.notice import ApprovalNotice
from engram.runs.service import unqueued
from engram.wiring.model import ModelDeps

CLIENT_TURN_TTL_S = 24 * 3600  # a clientTurnId names one turn for a day


def enqueue_turn(
    deps: ModelDeps,
    *,
    tenant: str,
    agent_id: str,
    session_id: str,
    message: str,
    trigger: str,
    session_checked: bool = False,
    client_turn_id: str | None = None,
) -> Run:
    """Queues a turn on the session's FIFO group and records a `queued` run the caller can poll.
    `client_turn_id` is the client's own id of the turn (ST4): the run and the claim of that id
    (scoped to the user, agent and session) are one transaction, so a resend, whatever its
    timing, answers with the run the first send recorded and queues nothing. `session_checked`:
    the caller has seen the session exist (a socket's subscription to it)."""
    check_message(deps, message)
    session = None if session_checked else deps.sessions.get(tenant, agent_id, session_id)
    if not session_checked and session is None:
        if deps.agents.get(tenant, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    if session is not None and session.get("awaitingRunId"):  # TL10: refused at once, not queued
        raise approval_pending(str(session["awaitingRunId"]))
    run = queued_run(agent_id, session_id, message, trigger)
    now = run.created_at
    job = TurnJob(
        run_id=run.id,
        tenant=tenant,
        agent_id=agent_id,
        session_id=session_id,
        message=message,
        trigger=trigger,
        created_at=now,
        client_turn_id=client_turn_id or None,  # named in the turn's events, so its sender knows them
    )
    limit = deps.settings.max_active_turns
    if deps.turn_admissions.active_turns(tenant) >= limit:  # ST7: a resend still learns its run
        if client_turn_id and (earlier := deps.turn_admissions.claimed(tenant, run, client_turn_id)) is not None:
            return earlier
        raise TooManyTurns(limit)
    earlier = deps.turn_admissions.create_turn(tenant, run, client_turn_id=client_turn_id, ttl_s=CLIENT_TURN_TTL_S)
    if earlier is not None:
        return earlier
    try:
        deps.queues.enqueue_turn(job.body(), group=f"{tenant}#{agent_id}#{session_id}", dedup_id=run.id)
    except Exception as err:
        _end_quietly(deps, tenant, run.id)
        raise unqueued(deps.runs, tenant, run) from err
    return run


def _end_quietly(deps: ModelDeps, tenant: str, run_id: str) -> None:
    """The turn stops counting against its user's cap; if that fails, its row expires by itself."""
    try:
        deps.turn_admissions.end_turn(tenant, run_id)
    except Exception:
        logger.warning("could not end an active turn's row; it expires", extra={"run_id": run_id})


def queued_run(agent_id: str, session_id: str, message: str, trigger: str) -> Run:
    """The record of a chat turn not started yet (queued, or claimed by its client's id)."""
    now = now_iso()
    return Run(
        id=new_id("run"),
        created_at=now,
        updated_at=now,
        agent_id=agent_id,
        kind="chat",
        trigger=trigger,
        status="queued",
        prompt=message,
        session_id=session_id,
    )


def ensure_session(deps: ModelDeps, tenant: str, agent_id: str, session_id: str) -> None:
    """Webhooks may name a new session: it is created on first use."""
    now = now_iso()
    session = Session(id=session_id, agent_id=agent_id, created_at=now, updated_at=now)
    deps.sessions.create(tenant, session, limit=deps.settings.max_sessions_per_agent, if_absent_ok=True)


def turn_policies(deps: ModelDeps) -> list[TurnPolicy]:
    """What every turn of an agent gets: its result card, the conversation archive, extraction
    (the running summary of what the history cap cuts is the session's conversation's:
    conversations.context)."""
    return [
        CardPolicy(deps.card_types),
        ArchivePolicy(deps.archive, deps.profiles),
        ExtractionPolicy(deps.queues),
        ApprovalNotice(deps.settings.approval_topic_arn),  # TL10: a paused turn tells its owner
    ]


def chat_plan(
    deps: ModelDeps,
    agent_id: str,
    session_id: str,
    *,
    run_id: str | None = None,
    budget_s: float | None = None,
    wait_s: float | None = None,
    trigger: str = "api",
    created_at: str | None = None,
) -> TurnPlan:
    return TurnPlan(
        session_id=session_id,
        run_id=run_id,
        budget_s=budget_s,
        wait_s=wait_s,
        policies=turn_policies(deps),
        run_fields={"agent_id": agent_id, "kind": "chat", "trigger": trigger, "created_at": created_at},
    )


_RECORDING_S = 4.0  # the failure grace (3 s) and a margin, kept before the function's own timeout
ANSWER_BY_S = 29.0  # a sync turn answers within this of its arrival: API Gateway gives up at 30 s
# What a sync turn's 504 tells the client (ST1): the long turn's ways off the request.
LONG_TURN_HINT = (
    "; a turn that needs longer runs off the request: POST .../messages?async=true (202 with a runId to poll), "
    "or send it over the WebSocket API (POST /api/stream-tickets) to watch it stream"
)


def run_chat_turn(
    deps: ModelDeps,
    tenant: str,
    agent_id: str,
    session_id: str,
    message: str,
    *,
    waited_s: float = 0.0,
    remaining_s: float | None = None,
    client_turn_id: str | None = None,
    person_name: str | None = None,
) -> TurnOutcome:
    """A sync chat turn (POST .../messages). Its budget counts from the request's arrival
    (`waited_s` ago: API Gateway's clock), not from when the function got to it, so it answers
    within API Gateway's 30 s however long the request waited, and never commits after the
    client was told 504; and it ends `_RECORDING_S` before the function's own timeout
    (`remaining_s`). A 504 says how to run a longer turn.

    `client_turn_id` (the `Idempotency-Key` header or the body's `clientTurnId`) names the turn
    for a day: its run and the claim of the id are recorded in one transaction before the turn
    runs, and a retry with the same id answers with that run's outcome (its reply, its failure,
    or 409 `turn_in_progress` while it runs) instead of running the turn again."""
    waited_s = max(0.0, waited_s)
    # Recording a failure (and freeing the lease) takes at most the grace after the budget: the
    # answer comes within ANSWER_BY_S of the request's arrival whatever SYNC_TURN_BUDGET_SECONDS says.
    budget = min(deps.settings.sync_turn_budget_s, ANSWER_BY_S - _RECORDING_S)
    if remaining_s is not None:
        budget = min(budget, waited_s + remaining_s - _RECORDING_S)
    plan = chat_plan(deps, agent_id, session_id, budget_s=budget)
    plan.started = time.monotonic() - waited_s
    if person_name:
        TOKEN_NAME.put(plan.tool_state, person_name)
        plan.resume_data["personName"] = person_name  # TL10: the same again if the turn pauses
    if client_turn_id:
        check_message(deps, message)
        claimed = queued_run(agent_id, session_id, message, "api")
        earlier = deps.turn_admissions.create_turn(
            tenant, claimed, client_turn_id=client_turn_id, ttl_s=CLIENT_TURN_TTL_S, counted=False
        )
        if earlier is not None and not (earlier.status == "queued" and earlier.trigger == "api"):
            return first_outcome(earlier)
        # A claimed sync turn still queued never started (its first send failed before): run it now.
        run = earlier or claimed
        plan.run_id, plan.run_fields["created_at"] = run.id, run.created_at
    try:
        return run_turn(deps, tenant, message, plan)
    except EngramError as err:
        if client_turn_id and plan.run_id and not (isinstance(err, TurnFailed) and err.run_id):
            _forget_claim(deps, tenant, agent_id, session_id, plan.run_id, client_turn_id)
        if not isinstance(err, TurnFailed) or err.code != "turn_timeout":
            raise
        raise TurnFailed(err.message + LONG_TURN_HINT, run_id=err.run_id, code=err.code, status=err.status) from err


def _forget_claim(deps: ModelDeps, tenant: str, agent_id: str, session_id: str, run_id: str, client_turn_id: str) -> None:
    """A claimed turn that ended before its run was recorded (the session was busy, the agent is
    gone, storage failed at the start): nothing ran, so the claim goes and a retry runs the turn."""
    try:
        run = deps.runs.get(tenant, run_id)
        if run is not None and run.status == "queued":
            deps.turn_admissions.drop_claim(tenant, run, client_turn_id=client_turn_id)
    except Exception:
        logger.warning("could not drop the claim of a turn that never ran", extra={"run_id": run_id}, exc_info=True)


def first_outcome(run: Run) -> TurnOutcome:
    """What a retry of a turn gets: the outcome its first send had (a replay, nothing runs)."""
    if run.status == "succeeded":
        result = run.result if isinstance(run.result, dict) else {}
        return TurnOutcome(run=run, reply=str(result.get("reply") or ""), tool_calls=run.tool_calls)
    if run.status == "awaiting_approval":  # TL10: paused; the retry learns it waits (202)
        return TurnOutcome(run=run, reply="", tool_calls=run.tool_calls)
    if run.status == "failed":
        error = run.error or {}
        code = str(error.get("code") or "turn_failed")
        status = {"storage_unavailable": 503, "turn_timeout": 504, "queue_unavailable": 503}.get(code, 502)
        raise TurnFailed(str(error.get("message") or "the turn failed"), run_id=run.id, code=code, status=status)
    running = Conflict(
        f"this turn is still running; see GET /api/runs/{run.id}", field="Idempotency-Key", code="turn_in_progress"
    )
    running.run_id = run.id
    raise running


def process_turn_job(deps: ModelDeps, job: TurnJob) -> None:
    """One queued turn. Raises only when it should be retried (the session is busy)."""
    tenant, run_id = job.tenant, job.run_id
    # The sockets watching the session (ST2) are looked up beside the redelivery check.
    watching = deps.executor.submit(deps.watchers, tenant, job.agent_id, job.session_id, run_id)
    existing = deps.runs.get(tenant, run_id)
    if existing is not None and existing.status not in ("queued", "running"):  # finished, or paused (TL10)
        logger.info("turn already finished; redelivery ignored", extra={"run_id": run_id})
        _end_quietly(deps, tenant, run_id)
        return
    plan = chat_plan(
        deps,
        job.agent_id,
        job.session_id,
        run_id=run_id,
        budget_s=deps.settings.async_turn_budget_s,
        wait_s=0,
        trigger=job.trigger,
        created_at=job.created_at,
    )
    plan.events = watching.result()
    if plan.events is not None and job.client_turn_id:
        plan.events.client_turn_id = job.client_turn_id
    retried = False
    try:
        run_turn(deps, tenant, job.message, plan)
    except SessionBusy:
        retried = True
        raise  # SQS redelivers; the FIFO group keeps later turns of this session behind it
    except (NotFound, Conflict) as err:  # gone, or the session waits for an approval (TL10): refused
        now = now_iso()
        deps.runs.put(
            tenant,
            Run(
                id=run_id,
                created_at=job.created_at or now,
                updated_at=now,
                finished_at=now,
                agent_id=job.agent_id,
                kind="chat",
                trigger=job.trigger,
                status="failed",
                prompt=job.message,
                session_id=job.session_id,
                error={"code": err.code, "message": err.message},
            ),
        )
    except TurnFailed as err:
        # Recorded as a failed run; a retry would be a new turn the user did not ask for. When the
        # outage that failed the turn also refused its record (no run id), it is recorded here,
        # tried again for a while, so the run does not sit `queued` until the sweeper.
        if err.run_id is None and err.code != "outcome_unknown":
            _record_failure(deps, tenant, job, {"code": err.code, "message": err.message})
    finally:
        if not retried:  # a turn that ended (or crashed: SQS redelivers it, and it counts again)
            _end_quietly(deps, tenant, run_id)


_RECORD_PAUSES_S = (0.2, 0.5, 1.0, 2.0, 4.0)  # about 8 s of a queued turn's budget


def _record_failure(deps: ModelDeps, tenant: str, job: TurnJob, error: dict[str, str]) -> None:
    now = now_iso()
    failed = Run(
        id=job.run_id,
        created_at=job.created_at or now,
        updated_at=now,
        finished_at=now,
        agent_id=job.agent_id,
        kind="chat",
        trigger=job.trigger,
        status="failed",
        prompt=job.message,
        session_id=job.session_id,
        error=error,
    )
    for pause in (0.0, *_RECORD_PAUSES_S):
        time.sleep(pause)
        try:
            deps.runs.fail_unfinished(tenant, failed)
            return
        except Exception:
            logger.warning("could not record the failed turn yet", extra={"run_id": failed.id}, exc_info=True)
    logger.error("the failed turn stays unrecorded; the sweeper will mark it", extra={"run_id": failed.id})
