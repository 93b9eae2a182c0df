"""Heartbeat, manual, re-examination and council runs: the `heartbeat` function's core.

Every run goes through the same path as a chat turn (`turns.run_turn`): a run record, usage rows
and an extraction job. What differs is where its context comes from:
- Active Memory off (AM1): a clean slate, with no session and no history, only the system prompt,
  the prompt, the team roster for leads, and tools.
- Active Memory on: heartbeats and manual runs share the agent's main session (`dashboard`) with
  chat, so each sees the other; a reset starts the model's context afresh (AM2).
- A lead (an agent with a `team`) first runs its specialists in parallel, blind (RM3); their results
  land in the run's memory under `task:<agentId>` and the lead's message names those keys.
- A re-examination (AM6) is a fresh run anchored to a prior decision: its prompt is built here
  from the parent's card, and its card is the re-examination card, whatever the agent's own format.

Runs are claimed before they execute (`RunRepository.start`), so a redelivered scheduler firing
or SQS message never runs an agent twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.agents.models import Agent
from engram.cards.models import CardType
from engram.cards.policy import CardPolicy
from engram.cards.service import find_card_type, reexamination_card_type
from engram.engine.cache import FIVE_MINUTES, CachePolicy, heartbeat_ttl
from engram.engine.plan import PausedTurn
from engram.engine.turn import TurnOutcome, TurnPlan, TurnPolicy, run_turn
from engram.extraction.enqueue import ExtractionPolicy
from engram.kernel.errors import BadRequest, LimitExceeded, NotFound, SessionBusy, TurnFailed, domain_error, error_of
from engram.kernel.fencing import inline, quote, token
from engram.kernel.ids import DASHBOARD, check_id, time_ordered_id
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.recall.policy import ArchivePolicy
from engram.run_memory.learnings import recent_learnings, render_learnings
from engram.run_memory.store import RUN_MEMORY, RUN_MEMORY_GUIDE, RunScratchpad, input_key
from engram.runs.council import members_of, resume_member_plan, run_council, team_roster
from engram.runs.council_wait import lead_waits
from engram.runs.expressions import shortest_interval
from engram.runs.models import ResumeJob, Run, RunJob
from engram.runs.notice import ApprovalNotice
from engram.runs.service import FALLBACK_PROMPT, queued
from engram.usage.service import refuse_over_limit
from engram.wiring.model import ModelDeps

_CLAIM_MARGIN_S = 60.0


# --- entry points (functions/heartbeat/app.py) -------------------------------------------------
def firing_run_id(agent_id: str, scheduled_time: str) -> str:
    """One run id per (agent, scheduled time): a redelivered firing finds its run already there.
    Shaped like every run id (time-ordered by the scheduled time), so run listings stay in order."""
    when = datetime.fromisoformat(scheduled_time.replace("Z", "+00:00"))
    digest = hashlib.sha256(f"{agent_id}\x00{scheduled_time}".encode()).digest()[:10]
    return time_ordered_id("run", int(when.timestamp() * 1000), digest)


def _scheduled_time(value: object) -> str | None:
    if not isinstance(value, str) or "<aws.scheduler" in value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _firing_of(event: object) -> tuple[str, str, str]:
    """(tenant, agent id, scheduled time) of a schedule's Input as Scheduler delivers it; BadRequest
    when it is not one."""
    if not isinstance(event, dict):
        raise BadRequest("a scheduler firing is a JSON object")
    tenant = check_id("tenant", event.get("tenant"))
    agent_id = check_id("agentId", event.get("agentId"))
    scheduled = _scheduled_time(event.get("scheduledTime"))
    if scheduled is None:
        raise BadRequest("a scheduler firing names its scheduled time", field="scheduledTime")
    return tenant, agent_id, scheduled


def process_schedule_event(deps: ModelDeps, event: Mapping[str, object]) -> dict[str, object]:
    """One EventBridge Scheduler firing (delivered at least once): the agent runs once per
    scheduled time, with its scheduled prompt (AM4)."""
    try:
        tenant, agent_id, scheduled = _firing_of(event)
    except BadRequest as err:
        logger.error("ignored a scheduler event that is not a valid firing", extra={"error": err.message})
        return {"status": "ignored", "reason": "invalid_event"}
    agent = deps.agents.get(tenant, agent_id)
    if agent is None or not agent.schedule:
        # Deleted, or its schedule was cleared while this firing was in flight.
        logger.info("scheduled firing for an agent without a schedule ignored", extra={"agent_id": agent_id})
        return {"status": "ignored", "reason": "no_schedule" if agent else "agent_not_found"}
    run_id = firing_run_id(agent_id, scheduled)
    prompt = agent.default_prompt or FALLBACK_PROMPT
    created = deps.runs.create(tenant, queued(agent.id, run_id, kind="heartbeat", trigger="schedule", prompt=prompt))
    if not created:
        metrics.add_metric(name="HeartbeatRedelivered", unit=MetricUnit.Count, value=1)
    outcome = execute_run(deps, tenant, run_id, agent=agent)
    return {"runId": run_id, "scheduledTime": scheduled, **outcome}


def is_failed_invocation(record: object) -> bool:
    """A record of Lambda's on-failure destination: an asynchronous invocation (a scheduler firing)
    that failed after its retries, or grew too old to run."""
    return isinstance(record, dict) and isinstance(record.get("requestContext"), dict) and "requestPayload" in record


def process_failed_firing(deps: ModelDeps, record: dict[str, object]) -> dict[str, object]:
    """A firing whose invocations all failed shows as its run, failed (`firing_failed`), under the
    run id the firing gets. A run that finished is left as it is, so a redelivered record changes
    nothing; a firing of an agent deleted meanwhile is dropped."""
    try:
        tenant, agent_id, scheduled = _firing_of(record.get("requestPayload"))
    except BadRequest as err:
        logger.error("ignored a failed invocation that is not a scheduler firing", extra={"error": err.message})
        return {"status": "ignored", "reason": "invalid_event"}
    agent = deps.agents.get(tenant, agent_id)
    if agent is None:
        logger.info("failed firing of a deleted agent dropped", extra={"agent_id": agent_id})
        return {"status": "ignored", "reason": "agent_not_found"}
    run_id = firing_run_id(agent_id, scheduled)
    run = queued(agent.id, run_id, kind="heartbeat", trigger="schedule", prompt=agent.default_prompt or FALLBACK_PROMPT)
    failed = run.model_copy(update={"status": "failed", "finished_at": run.updated_at, "error": firing_error(record)})
    if not deps.runs.fail_unfinished(tenant, failed):
        logger.info("failed firing's run had already finished; left as it is", extra={"run_id": run_id})
        return {"runId": run_id, "status": "unchanged"}
    logger.warning(
        "scheduled firing failed after its retries; its run is recorded as failed",
        extra={"run_id": run_id, "request_context": record.get("requestContext"), "response": record.get("responsePayload")},
    )
    metrics.add_metric(name="FiringFailed", unit=MetricUnit.Count, value=1)
    return {"runId": run_id, "status": "failed"}


_ERROR_MESSAGE_MAX = 1000


def firing_error(record: dict[str, Any]) -> dict[str, str]:
    """The run's error for a failed firing. Our own errors keep their message (written for clients);
    any other error's text stays in the logs (in AWS it carries ARNs and account ids, see
    `error_of`): the run names its type and the invocation's request id to look it up by."""
    context = record.get("requestContext") or {}
    response = record.get("responsePayload")
    response = response if isinstance(response, dict) else {}
    error_type, message = str(response.get("errorType") or ""), str(response.get("errorMessage") or "")
    attempts = context.get("approximateInvokeCount") or "several"
    if context.get("condition") == "EventAgeExceeded":
        text = "the firing was not run within the hour it may wait (EventAgeExceeded); nothing ran"
    elif error_type and domain_error(error_type) and message:
        text = message
    elif error_type == "Sandbox.Timedout" or "Task timed out" in message:
        text = f"the run did not finish within the function's timeout ({attempts} attempts)"
    else:
        text = (
            f"the scheduled run failed {attempts} times ({error_type or context.get('condition') or 'unknown error'}); "
            f"the heartbeat function's logs have the details under request id {context.get('requestId') or 'unknown'}"
        )
    return {"code": "firing_failed", "message": text[:_ERROR_MESSAGE_MAX]}


SWEEP_SOURCE = "engram.sweep"  # the sweeper's scheduled event: {"source": "engram.sweep"}


def is_sweep(event: object) -> bool:
    return isinstance(event, dict) and event.get("source") == SWEEP_SOURCE


def sweep_stale_runs(deps: ModelDeps, *, now: int | None = None) -> dict[str, object]:
    """No run stays queued or running past its budget and RUN_STALE_GRACE_SECONDS: whatever kept
    it there (a worker that crashed, a job parked in a dead-letter queue, a failure that could not
    be recorded), the sweeper marks it failed (`stale`). A run that finished, was claimed or given
    back since it was read is left alone (each mark is one conditional update)."""
    swept = 0
    for tenant, run_id, seen in deps.runs.stale(now=now):
        if deps.runs.fail_stale(tenant, run_id, seen):
            swept += 1
            logger.warning("stale run marked failed", extra={"run_id": run_id})
            _free_waiting_session(deps, tenant, run_id)
    if swept:
        metrics.add_metric(name="RunsSwept", unit=MetricUnit.Count, value=swept)
    return {"swept": swept}


def _free_waiting_session(deps: ModelDeps, tenant: str, run_id: str) -> None:
    """A resumed turn (TL10) that stalled and was marked failed: its session takes turns again."""
    run = deps.runs.get(tenant, run_id)
    if run is not None and run.paused is not None and run.session_id:
        deps.sessions.clear_awaiting(tenant, run.agent_id, run.session_id, run.id)


_BUSY_RETRY_DELAY_S = 60  # SQS DelaySeconds of a run whose shared session was busy
_BUSY_RETRIES = 5


def process_run_job(deps: ModelDeps, job: RunJob) -> None:
    """One API-started run from the run queue; a failed run is recorded, not retried. A run whose
    shared session stayed busy is sent again with a delay (the queue's own redelivery would wait
    for the hour-long visibility timeout), and recorded as failed after a few tries."""
    tenant, run_id = check_id("tenant", job.tenant), check_id("runId", job.run_id)
    try:
        execute_run(deps, tenant, run_id, inputs=job.inputs or None)
    except SessionBusy as err:
        attempt = job.attempt or 1
        if attempt >= _BUSY_RETRIES:
            run = deps.runs.start(tenant, run_id, claim_s=60)
            if run is not None:
                _record_failure(deps, tenant, run, err)
            return
        deps.queues.enqueue_run(job.model_copy(update={"attempt": attempt + 1}).body(), delay_s=_BUSY_RETRY_DELAY_S)


def execute_run(
    deps: ModelDeps,
    tenant: str,
    run_id: str,
    *,
    agent: Agent | None = None,
    inputs: dict[str, object] | None = None,
    continued: bool = False,
) -> dict[str, object]:
    """Claims the run (or returns at once if it finished or another worker has it) and executes it.
    `continued`: a council's lead that waited for its members (TL10) goes on, claimed once."""
    budget = deps.settings.run_budget_s
    run = deps.runs.start(tenant, run_id, claim_s=2 * budget + _CLAIM_MARGIN_S, waiting=continued)
    if run is None:
        logger.info("run already finished or running elsewhere; delivery ignored", extra={"run_id": run_id})
        return {"status": "duplicate"}
    started = time.monotonic()
    agent = agent if agent is not None and agent.id == run.agent_id else deps.agents.get(tenant, run.agent_id)
    if agent is None:
        _record_failure(deps, tenant, run, NotFound("agent not found", field="agentId"))
        return {"status": "failed"}
    try:
        if run.kind in _LIMITED_BEFORE_START and not continued:
            refuse_over_limit(deps.usage, tenant, agent.id, agent.limits)  # skipped before any model call (TL10)
        status = _execute(deps, tenant, run, agent, inputs, continued=continued)
    except LimitExceeded as err:
        logger.info("run skipped: a spending limit is reached", extra={"run_id": run.id, **err.context})
        metrics.add_metric(name="RunSkippedOverLimit", unit=MetricUnit.Count, value=1)
        _record_failure(deps, tenant, run, err)
        status = "skipped"
    except SessionBusy:
        if continued:  # a council's lead waits again; its continuation comes back later (TL10)
            deps.runs.put(tenant, run.model_copy(update={"status": "awaiting_approval", "updated_at": now_iso()}))
            deps.queues.enqueue_run(ResumeJob(tenant=tenant, run_id=run.id).body(), delay_s=_BUSY_RETRY_DELAY_S)
            return {"status": "awaiting_approval"}
        deps.runs.requeue(tenant, run.id)  # the retry claims it again
        raise
    except TurnFailed:
        status = "failed"  # recorded by run_turn
    except Exception as err:  # anything before the agent's own turn: recorded, never half-done
        logger.exception("run failed", extra={"run_id": run.id})
        _record_failure(deps, tenant, run, err)
        status = "failed"
    if status != "awaiting_approval":  # TL10: a paused run is counted when it ends
        metrics.add_metric(name="RunSucceeded" if status == "succeeded" else "RunFailed", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="RunLatency", unit=MetricUnit.Milliseconds, value=(time.monotonic() - started) * 1000)
    return {"status": status}


# Scheduled and manual runs of an agent over a spending limit are not started (their turns are
# checked before each model call like every turn; a council's members would run first).
_LIMITED_BEFORE_START = ("heartbeat", "manual")


def _record_failure(deps: ModelDeps, tenant: str, run: Run, err: Exception) -> None:
    at = now_iso()
    error = error_of(err)
    if isinstance(err, LimitExceeded):
        error["skipped"] = True  # nothing ran: no model call, no session touched
    deps.runs.put(tenant, run.model_copy(update={"status": "failed", "updated_at": at, "finished_at": at, "error": error}))


def _card_type(deps: ModelDeps, tenant: str, run: Run) -> CardType | None:
    """A re-examination's card: the re-examination card of its parent's type (None for other runs)."""
    if run.kind != "reexamination":
        return None
    parent = deps.runs.get(tenant, run.parent_run_id or "")
    parent_type = find_card_type(deps.card_types, tenant, (parent.result or {}).get("cardType") or "") if parent else None
    if parent is None or parent_type is None:
        raise NotFound("the run being re-examined no longer exists", field="parentRunId")
    return reexamination_card_type(parent_type)


def _policies(
    deps: ModelDeps, agent: Agent, run: Run, card_type: CardType | None, chain: list[dict[str, Any]]
) -> list[TurnPolicy]:
    return [
        CardPolicy(deps.card_types, override=card_type, required=card_type is not None),
        ArchivePolicy(deps.archive),
        ExtractionPolicy(deps.queues, chain_id=run.id[-8:] if agent.team else None, chain_messages=chain),
        ApprovalNotice(deps.settings.approval_topic_arn),  # TL10: a paused run tells its owner
    ]


def _execute(
    deps: ModelDeps, tenant: str, run: Run, agent: Agent, inputs: Mapping[str, object] | None, *, continued: bool = False
) -> str:
    settings = deps.settings
    card_type = _card_type(deps, tenant, run)  # checked first: a council is not run for a parent that is gone
    if continued:  # TL10: the inputs and the members' results are in the run memory already
        memory = RunScratchpad.load(deps.run_memory, tenant, agent.id, run.id, settings)
        declared = [(e.key, f"caller input {e.title}") for e in memory.list(kind="input")]
    else:
        memory = RunScratchpad(deps.run_memory, tenant, agent.id, run.id, settings)
        if inputs:
            memory.seed_inputs(inputs)
        declared = [(input_key(name), f"caller input {name}") for name, value in (inputs or {}).items() if value is not None]
    extra = [RUN_MEMORY_GUIDE]
    chain: list[dict[str, Any]] = []
    if agent.team:
        # Blind specialists: a re-examination's council works on the lead's usual task, never the
        # parent decision; nobody but the lead sees prior decisions.
        task = (agent.default_prompt or FALLBACK_PROMPT) if run.kind == "reexamination" else run.prompt
        members = members_of(memory, agent.team) if continued else run_council(deps, tenant, run, agent, memory, task)
        waiting = [m.waiting for m in members if m.waiting]
        if waiting:  # TL10: members wait for their owners' approval; so does the lead, holding nothing
            return lead_waits(deps, tenant, run, waiting)
        declared += [(m.key, m.title) for m in members]
        extra.append(team_roster(members))
        chain = [
            {"role": "assistant", "content": [{"type": "text", "text": f"[{inline(m.title)}] {m.reply}"}]}
            for m in members
            if m.reply
        ]
        learnings = _best_effort(
            lambda: recent_learnings(
                deps.memories, deps.executor, tenant, [agent.id, *agent.team], settings.director_learnings_shown
            )
        )
        rendered = render_learnings(learnings) if learnings else None
        if rendered:
            extra.append(rendered)
    message = run.prompt + upstream_hint(declared)
    shared = agent.active_memory and run.kind in ("heartbeat", "manual")
    # On the shared session (Active Memory) a run of an agent alone, handed nothing, gets a chat
    # turn's tools and system prompt, so its request extends the chat's cached prompt prefix
    # (engine.cache): its run memory would hold nothing, with nobody to share it with.
    with_run_memory = not (shared and not agent.team and not inputs)
    policies = _policies(deps, agent, run, card_type, chain)
    plan = TurnPlan(
        session_id=DASHBOARD if shared else None,
        run_id=run.id,
        budget_s=settings.run_budget_s,
        wait_s=settings.run_session_wait_s,
        agent=agent,
        session_counters=("runsSinceReset",) if shared else (),
        system_blocks=extra if with_run_memory else [b for b in extra if b != RUN_MEMORY_GUIDE],
        tool_state={RUN_MEMORY: memory} if with_run_memory else {},
        policies=policies,
        run_fields={"kind": run.kind, "trigger": run.trigger, "created_at": run.created_at, "parent_run_id": run.parent_run_id},
        cache=run_cache_policy(agent, run, shared=shared),
        events=deps.watchers(tenant, agent.id, DASHBOARD, run.id) if shared else None,  # sockets on the shared session (ST2)
        resume_data={"withRunMemory": with_run_memory, "chain": chain},  # TL10: what resume_plan needs again
    )
    return finish_run(deps, tenant, run, run_turn(deps, tenant, message, plan))


def resume_plan(deps: ModelDeps, tenant: str, run: Run, agent: Agent, paused: PausedTurn) -> TurnPlan:
    """The plan of a heartbeat, manual run or re-examination that paused for approvals (TL10), built
    again from what it stored: its session (the shared one or none), system blocks, run memory,
    card and extraction chain; the council it ran first is not run again. A council's member gets its
    own plan again (runs.council)."""
    if run.kind == "council_member":
        return resume_member_plan(deps, tenant, run, agent, paused)
    settings = deps.settings
    stored, extra = paused.plan, paused.plan.get("resumeData") or {}
    shared = stored.get("sessionId") is not None
    memory = RunScratchpad(deps.run_memory, tenant, agent.id, run.id, settings)
    return TurnPlan(
        session_id=stored.get("sessionId"),
        run_id=run.id,
        budget_s=settings.run_budget_s,
        wait_s=settings.run_session_wait_s,
        agent=agent,
        session_counters=tuple(stored.get("sessionCounters") or ()),
        system_blocks=list(stored.get("systemBlocks") or []),
        tool_state={RUN_MEMORY: memory} if extra.get("withRunMemory") else {},
        policies=_policies(deps, agent, run, _card_type(deps, tenant, run), list(extra.get("chain") or [])),
        run_fields=dict(stored.get("runFields") or {}),
        cache=run_cache_policy(agent, run, shared=shared),
        events=deps.watchers(tenant, agent.id, DASHBOARD, run.id) if shared else None,
        resume_data=dict(extra),
        resume=paused,
        approvals=run.pending_approvals,
    )


def finish_run(deps: ModelDeps, tenant: str, run: Run, result: TurnOutcome) -> str:
    """A run's turn ended (or paused for approvals): a re-examination's conviction goes on its parent."""
    if result.run.status == "succeeded" and run.kind == "reexamination" and run.parent_run_id:
        card = (result.run.result or {}).get("card") or {}
        deps.run_decisions.set_latest_conviction(
            tenant, run.parent_run_id, score=int(card["conviction_score"]), child_run_id=run.id, child_created_at=run.created_at
        )
    return result.run.status


def run_cache_policy(agent: Agent, run: Run, *, shared: bool) -> CachePolicy:
    """A scheduled heartbeat's prompt cache TTLs follow its schedule (engine.cache.heartbeat_ttl):
    the stable prefix gets an hour when the next heartbeat comes in 5 to 60 minutes; so does the
    history on the shared session (Active Memory), which the next heartbeat's request starts with."""
    if run.kind != "heartbeat" or not agent.schedule:
        return CachePolicy()
    ttl = heartbeat_ttl(shortest_interval(agent.schedule))
    return CachePolicy(prefix_ttl=ttl, history_ttl=ttl if shared else FIVE_MINUTES)


def upstream_hint(declared: list[tuple[str, str]]) -> str:
    """The lines of the run's message naming the run memory keys to read; a title is stored text
    (a member's name and persona line, an input's name), so it is quoted."""
    if not declared:
        return ""
    return "\n\n# Required upstream memory (call `memory_read` with these keys):\n" + "\n".join(
        f"- {token(key)} — {quote(title)}" for key, title in declared
    )


def _best_effort[R](load: Callable[[], R]) -> R | None:
    try:
        return load()
    except Exception:
        logger.exception("director learnings left out of the run")
        return None
