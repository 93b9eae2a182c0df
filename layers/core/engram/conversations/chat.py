"""Chat turns that do not run inside the request: `?async=true` and webhooks queue them on the
session's FIFO group; the chat function's queue consumer runs them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engram.cards.policy import CardPolicy
from engram.conversations.models import Session
from engram.engine.turn import TurnOutcome, TurnPlan, TurnPolicy, check_message, run_turn
from engram.extraction.enqueue import ExtractionPolicy
from engram.kernel.errors import NotFound, SessionBusy, TurnFailed
from engram.kernel.ids import new_id
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.recall.policy import ArchivePolicy
from engram.runs.models import Run
from engram.runs.service import unqueued
from engram.wiring.model import ModelDeps


def enqueue_turn(
    deps: ModelDeps,
    *,
    tenant: str,
    agent_id: str,
    session_id: str,
    message: str,
    trigger: str,
    claim: Callable[[str], str | None] | None = None,
    session_checked: bool = False,
    client_turn_id: str | None = None,
) -> Run:
    """Queues a turn on the session's FIFO group and records a `queued` run the caller can poll.
    `claim` ties the new run's id to the client's own id of the turn: when it names an earlier
    run, the turn was sent already and that run is returned (a WebSocket client resending). `session_checked`: the caller has
    seen the session exist (a socket's subscription to it)."""
    check_message(deps, message)
    if not session_checked and deps.sessions.get(tenant, agent_id, session_id) is None:
        if deps.agents.get(tenant, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    now = now_iso()
    run = Run(
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
    earlier = claim(run.id) if claim is not None else None
    if earlier is not None and (found := deps.runs.get(tenant, earlier)) is not None:
        return found
    job = {
        "runId": run.id,
        "tenant": tenant,
        "agentId": agent_id,
        "sessionId": session_id,
        "message": message,
        "kind": "chat",
        "trigger": trigger,
        "createdAt": now,
    }
    if client_turn_id:
        job["clientTurnId"] = client_turn_id  # named in the turn's events, so its sender knows them
    deps.runs.put(tenant, run, only_if_new=True)
    try:
        deps.queues.enqueue_turn(job, group=f"{tenant}#{agent_id}#{session_id}", dedup_id=run.id)
    except Exception as err:
        raise unqueued(deps, tenant, run) from err
    return run


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
        CardPolicy(deps),
        ArchivePolicy(deps.archive),
        ExtractionPolicy(deps.queues),
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
) -> TurnOutcome:
    """A sync chat turn (POST .../messages). Its budget counts from the request's arrival
    (`waited_s` ago: API Gateway's clock), not from when the function got to it, so it answers
    within API Gateway's 30 s however long the request waited, and never commits after the
    client was told 504; and it ends `_RECORDING_S` before the function's own timeout
    (`remaining_s`). A 504 says how to run a longer turn."""
    waited_s = max(0.0, waited_s)
    budget = deps.settings.sync_turn_budget_s
    if remaining_s is not None:
        budget = min(budget, waited_s + remaining_s - _RECORDING_S)
    plan = chat_plan(deps, agent_id, session_id, budget_s=budget)
    plan.started = time.monotonic() - waited_s
    try:
        return run_turn(deps, tenant, message, plan)
    except TurnFailed as err:
        if err.code != "turn_timeout":
            raise
        raise TurnFailed(err.message + LONG_TURN_HINT, run_id=err.run_id, code=err.code, status=err.status) from err


def process_turn_job(deps: ModelDeps, job: dict[str, Any]) -> None:
    """One queued turn. Raises only when it should be retried (the session is busy)."""
    tenant, run_id = job["tenant"], job["runId"]
    # The sockets watching the session (ST2) are looked up beside the redelivery check.
    watching = deps.executor.submit(deps.watchers, tenant, job["agentId"], job["sessionId"], run_id)
    existing = deps.runs.get(tenant, run_id)
    if existing is not None and existing.status in ("succeeded", "failed"):
        logger.info("turn already finished; redelivery ignored", extra={"run_id": run_id})
        return
    plan = chat_plan(
        deps,
        job["agentId"],
        job["sessionId"],
        run_id=run_id,
        budget_s=deps.settings.async_turn_budget_s,
        wait_s=0,
        trigger=job.get("trigger", "async"),
        created_at=job.get("createdAt"),
    )
    plan.events = watching.result()
    if plan.events is not None and job.get("clientTurnId"):
        plan.events.started_with["clientTurnId"] = job["clientTurnId"]
    try:
        run_turn(deps, tenant, job["message"], plan)
    except SessionBusy:
        raise  # SQS redelivers; the FIFO group keeps later turns of this session behind it
    except NotFound as err:
        now = now_iso()
        deps.runs.put(
            tenant,
            Run(
                id=run_id,
                created_at=job.get("createdAt") or now,
                updated_at=now,
                finished_at=now,
                agent_id=job["agentId"],
                kind="chat",
                status="failed",
                prompt=job["message"],
                session_id=job["sessionId"],
                error={"code": err.code, "message": err.message},
            ),
        )
    except TurnFailed:
        pass  # recorded as a failed run; a retry would be a new turn the user did not ask for
