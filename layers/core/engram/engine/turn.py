"""One turn, applied atomically: transcript, run record and usage change together or not at all.

The engine knows how a turn runs (lease, transcript, prompt, tool loop, one commit); what a turn
is FOR is its caller's business, handed over as a `TurnPlan`: where its context comes from (a
session, or a clean slate), run-specific system text, state for the caller's tools, and
`TurnPolicy` hooks that features plug in (a card policy, the conversation archive, extraction).

Hot path of a chat turn: agent read and session lease in parallel (2 DynamoDB calls), one S3 GET,
the model, one conditional S3 PUT, one DynamoDB transaction (session + run + usage + archive),
then the after-commit hooks (the extraction job: one SQS send) once the reply is settled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from engram.agents.models import Agent
from engram.agents.ports import Agents
from engram.aws.deadline import OutOfTime, remaining, within
from engram.conversations.models import SessionState
from engram.conversations.ports import Sessions
from engram.engine import timeline
from engram.engine.approval import after_pause, audited, pause, resumed
from engram.engine.context import ContextSource, Conversation, MemoryReads, TurnContext
from engram.engine.lease import LeaseKeeper, release_quietly
from engram.engine.loop import LoopResult, run_loop
from engram.engine.plan import TOOL_CALL_DETAILS as TOOL_CALL_DETAILS
from engram.engine.plan import TurnOutcome as TurnOutcome
from engram.engine.plan import TurnPlan as TurnPlan
from engram.engine.plan import TurnPolicy as TurnPolicy
from engram.engine.plan import public_tool_call as public_tool_call
from engram.engine.plan import record_metrics as _record_metrics
from engram.engine.plan import usage_rows as _usage_rows
from engram.engine.prompt import MemoryView, PromptSection, build_system, fit_sections
from engram.engine.providers.base import ModelProvider
from engram.engine.tools import TURN_MESSAGE, ToolContext, ToolDeps, ToolRegistry, ToolSet, ToolSource
from engram.kernel.errors import (
    EngramError,
    NotFound,
    PayloadTooLarge,
    SessionBusy,
    StorageUnavailable,
    TurnFailed,
    error_of,
)
from engram.kernel.ids import new_id
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.secrets import find_secret
from engram.runs.models import Run
from engram.runs.ports import Runs
from engram.usage.limits import Spend, SpendGuard
from engram.usage.ports import UsageLedger
from engram.usage.totals import today

TITLE_CHARS = 60
TITLE_SCAN_CHARS = 4_000  # longer than any key format whose first 60 characters alone give it away
UNTITLED = "Untitled session"
_COMMIT_RESERVE_S = 2.0  # of the budget, kept for the transcript PUT and the commit
_FAILURE_GRACE_S = 3.0  # past the budget, to record a failure: still inside API Gateway's 30 s


class TurnDeps(ToolDeps, Protocol):
    """What the engine needs from its composition root (wiring.ModelDeps provides it): what its
    tools may rely on (settings, the pool) and the stores and parts of a turn."""

    @property
    def agents(self) -> Agents: ...
    @property
    def sessions(self) -> Sessions: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def registry(self) -> ToolRegistry: ...
    @property
    def sections(self) -> list[PromptSection]: ...
    @property
    def provider(self) -> ModelProvider: ...
    @property
    def tool_sources(self) -> list[ToolSource]: ...
    @property
    def context_source(self) -> ContextSource | None: ...


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def check_message(deps: TurnDeps, message: str) -> None:
    limit = deps.settings.message_max_chars
    if len(message) > limit:
        raise PayloadTooLarge(
            f"message is {len(message)} characters; the limit is {limit}", field="message", code="message_too_long"
        )


@dataclass
class _Turn:
    """The state of one turn in flight."""

    deps: TurnDeps
    tenant: str
    message: str
    plan: TurnPlan
    run: Run
    ctx: ToolContext
    session: SessionState | None
    started: float
    deadline: float
    spend: Future[Spend]  # what is spent already (one read, beside the agent read and the lease)
    loop: LoopResult = field(default_factory=LoopResult)
    conversation: Conversation | None = None  # a session turn's (engine.context)
    loaded: dict[str, Future[Any]] = field(default_factory=dict)  # the memory sections' reads
    prepared: list[Future[None]] = field(default_factory=list)  # the policies' reads
    toolsets: list[Future[ToolSet | None]] = field(default_factory=list)  # the agent's external tools
    cut: int = 0  # messages the trim cut from the transcript when it was saved
    lease: LeaseKeeper | None = None  # renews the session's lease while the turn runs


def run_turn(deps: TurnDeps, tenant: str, message: str, plan: TurnPlan) -> TurnOutcome:
    """Runs one turn as `plan` says; a failure is recorded (run failed, tokens billed, lease freed,
    transcript untouched) and raised as TurnFailed. Every AWS call of the turn ends by its
    deadline (aws.deadline); recording a failure and the after-commit hooks get a short grace."""
    started = time.monotonic() if plan.started is None else plan.started
    deadline = started + (deps.settings.sync_turn_budget_s if plan.budget_s is None else plan.budget_s)
    events = plan.events
    try:
        with within(deadline):
            turn = _start(deps, tenant, message, plan, started, deadline)
            try:
                outcome = _run_started(turn)
            finally:
                for toolset in turn.ctx.toolsets:
                    toolset.close()  # e.g. the turn's MCP sessions (TL7)
                if turn.lease is not None:
                    turn.lease.stop()
                timeline.finish(turn.ctx, deps.settings)  # OB1/OB2: the root span ends, exported if asked
    except Exception as err:
        # A busy session is retried (the queue redelivers the job): not the end of the turn.
        if events is not None and not isinstance(err, SessionBusy):
            events.failed({**error_of(err), **({"runId": err.run_id} if isinstance(err, TurnFailed) and err.run_id else {})})
        raise
    if events is not None and outcome.run.status != "awaiting_approval":  # a paused turn said so (TL10)
        events.completed(outcome.public())
    return outcome


def _run_started(turn: _Turn) -> TurnOutcome:
    deps, plan = turn.deps, turn.plan
    try:
        if plan.events is not None and plan.resume is None:  # a resumed turn's watchers saw it start
            run = turn.run  # what a watcher shows of a turn it did not start: who and why
            plan.events.started(
                agent_id=run.agent_id,
                session_id=run.session_id or "",
                kind=run.kind,
                trigger=run.trigger,
                message=turn.message,
            )
        context = _load_context(turn)
        system = build_system(
            turn.ctx.agent,
            context.memory,
            persona_extra=[line for p in plan.policies for line in p.persona(turn.ctx)],
            extra="\n\n".join(plan.system_blocks) or None,
            session_blocks=context.blocks,
        )
        settings = deps.settings
        loop_deadline = turn.deadline - min(_COMMIT_RESERVE_S, (turn.deadline - turn.started) * 0.2)
        run_loop(
            provider=deps.provider,
            registry=deps.registry,
            ctx=turn.ctx,
            model=turn.ctx.agent.model,
            system=system,
            messages=context.messages,
            max_tokens=settings.max_output_tokens,
            max_rounds=settings.max_tool_rounds,
            # The model stops early enough for the transcript PUT and the commit to fit.
            deadline=loop_deadline,
            model_timeout=settings.model_timeout_s,
            result=turn.loop,
            cache=plan.cache,
            stable_blocks=len(user_message(turn.message)["content"]),
            memory_index=(1 if context.memory else 0) + context.front or None,
            summary_index=(1 if context.memory else 0) + len(context.blocks) if context.blocks else None,
            events=plan.events,
            guard=SpendGuard.of(turn.ctx.agent.limits, turn.spend.result()),  # the limits (TL10), if any
            prior=resumed(plan, deps.registry, turn.ctx, loop_deadline, turn.loop),  # TL10: a resumed turn's
        )
        if turn.loop.pending:  # TL10: calls wait for the owner's approval (engine.approval)
            run = pause(deps.runs, turn.tenant, turn.run, turn.loop, plan, turn.ctx, turn.message)
            _await_background(turn.ctx)
            return after_pause(plan, turn.ctx, TurnOutcome(run, turn.loop.reply, run.tool_calls, _turn_messages(turn)))
        result: dict[str, Any] = {"reply": turn.loop.reply}
        for policy in plan.policies:
            policy.finish(turn.ctx, turn.loop, result)
        if turn.conversation is not None:
            turn.cut = turn.conversation.save(_stored_turn_messages(turn), turn.run.id)
    except Exception as err:
        with within(turn.deadline + _FAILURE_GRACE_S):
            recorded = _fail(turn, err)
            _await_background(turn.ctx)
        raise _as_turn_failure(err, turn.run.id if recorded else None) from err
    return _commit(turn, result)


def _start(deps: TurnDeps, tenant: str, message: str, plan: TurnPlan, started: float, deadline: float) -> _Turn:
    budget = deadline - started
    run_id = plan.run_id or new_id("run")
    check_message(deps, message)
    agent_id = plan.run_fields.get("agent_id") or (plan.agent.id if plan.agent else "")
    spend = deps.executor.submit(deps.usage.spend, tenant, agent_id, today())
    with timeline.lease_wait(run_id, plan.session_id, plan.run_fields, started) as trace:  # the agent read beside it
        agent, session = _load_agent_and_session(deps, tenant, agent_id, plan, run_id, budget)
    run = Run(
        id=run_id,
        created_at=plan.run_fields.get("created_at") or now_iso(),
        updated_at=now_iso(),
        started_at=now_iso(),
        agent_id=agent.id,
        status="running",
        prompt=message,
        session_id=plan.session_id,
        session_revision_before=session.revision if session is not None else None,
        model=agent.model,
        pending_approvals=plan.approvals,  # TL10: a resumed turn's decided requests stay on the run (its audit)
        **{k: v for k, v in plan.run_fields.items() if k not in ("agent_id", "created_at") and v is not None},
    )
    ctx = ToolContext(
        tenant=tenant,
        agent=agent,
        session_id=plan.session_id or "",
        run_id=run_id,
        deps=deps,
        state={**plan.tool_state, TURN_MESSAGE: message, timeline.TRACE: timeline.for_agent(trace, agent)},
    )
    turn = _Turn(
        deps=deps,
        tenant=tenant,
        message=message,
        plan=plan,
        run=run,
        ctx=ctx,
        session=session,
        started=started,
        deadline=deadline,
        spend=spend,
    )
    if session is not None and plan.session_id is not None:
        ttl = deps.settings.session_lease_s
        turn.lease = LeaseKeeper(deps.sessions, tenant, agent.id, plan.session_id, run_id, ttl).start()
    # Memory sections and the policies' reads run in parallel with the transcript GET; sections are best-effort.
    turn.loaded = timeline.start_sections_traced(deps.sections, ctx, deps.executor)
    turn.prepared = [deps.executor.submit(p.prepare, ctx) for p in plan.policies]
    turn.toolsets = [deps.executor.submit(source.toolset, ctx) for source in deps.tool_sources]
    return turn


def _load_agent_and_session(
    deps: TurnDeps, tenant: str, agent_id: str, plan: TurnPlan, run_id: str, budget: float
) -> tuple[Agent, SessionState | None]:
    """The agent (one GetItem unless the caller has it) and, for a session turn, the session lease
    taken in parallel with it. A clean-slate turn has no session."""
    if plan.session_id is None:
        agent = plan.agent or deps.agents.get(tenant, agent_id)
        if agent is None:
            raise NotFound("agent not found", field="agentId")
        return agent, None
    agent_future: Future[Agent | None] | None = None if plan.agent else deps.executor.submit(deps.agents.get, tenant, agent_id)

    def the_agent() -> Agent | None:
        return plan.agent or (agent_future.result() if agent_future is not None else None)

    try:
        session = deps.sessions.wait_for_lease(
            tenant,
            agent_id,
            plan.session_id,
            run_id,
            deps.settings.session_lease_s,
            deps.settings.session_wait_s if plan.wait_s is None else plan.wait_s,
            "another turn is running on this session; retry when it finishes or use ?async=true",
        )
    except NotFound:
        if the_agent() is None:
            raise NotFound("agent not found", field="agentId") from None
        raise
    except OutOfTime as err:  # the stalled lease update may still land: then free it at once
        err.if_it_lands(lambda: _release_quietly(deps, tenant, agent_id, plan.session_id or "", run_id))
        raise
    try:
        agent = the_agent()
    except Exception:
        _release_quietly(deps, tenant, agent_id, plan.session_id, run_id)
        raise
    if agent is None:
        _release_quietly(deps, tenant, agent_id, plan.session_id, run_id)
        raise NotFound("agent not found", field="agentId")
    return agent, session


def _release_quietly(deps: TurnDeps, tenant: str, agent_id: str, session_id: str, run_id: str) -> None:
    # within the grace left of recording a failure (the answer comes within 29 s of arrival)
    grace = min(_FAILURE_GRACE_S, max(remaining() or _FAILURE_GRACE_S, 0.5))
    release_quietly(deps.sessions, tenant, agent_id, session_id, run_id, grace_s=grace)


def _load_context(turn: _Turn) -> TurnContext:
    """What the turn sends beside tools and persona. A session turn's conversation (the transcript
    GET, beside the memory sections' and the policies' reads) builds it (engine.context); a clean
    slate sends the memory sections as they are and the new message alone."""
    deps, plan = turn.deps, turn.plan
    if plan.session_id is not None:
        source = deps.context_source
        if source is None:
            raise TypeError("a session turn needs a ContextSource (ModelDeps.context_source, set by the roots)")
        turn.conversation = source.open(turn.ctx, turn.session or SessionState())
    for prepared in turn.prepared:
        prepared.result()
    turn.ctx.toolsets = _toolsets(turn)
    budget = deps.settings.memory_sections_token_budget

    def fit(tokens: int) -> MemoryView:
        return fit_sections(deps.sections, turn.loaded, _section_failed, budget_tokens=tokens)

    incoming = user_message(turn.message)
    if turn.conversation is None:
        return TurnContext(memory=fit(budget).text, messages=[incoming])
    return turn.conversation.context(incoming, MemoryReads(fit, lambda: _deeper_known(turn), budget))


def _deeper_known(turn: _Turn) -> set[str]:
    """The entry lines of the sections' deeper pages (PromptSection.load_deep); a section whose
    read fails adds none, so its rows are taken again as when its first read failed."""
    known: set[str] = set()
    for section in turn.deps.sections:
        if section.load_deep is None:
            continue
        try:
            known.update(section.known_entries(section.load_deep(turn.ctx)))
        except Exception as err:
            _section_failed(section.name, err)
    return known


def _toolsets(turn: _Turn) -> list[ToolSet]:
    """The agent's external tools; best-effort like the memory sections: a source that fails
    leaves its tools out of this turn (logged and counted), it never fails the turn."""
    found = []
    for future in turn.toolsets:
        try:
            toolset = future.result()
        except Exception as err:
            logger.warning(
                "a tool source failed; its tools are left out of this turn", extra={"error": repr(err), "run_id": turn.run.id}
            )
            metrics.add_metric(name="ToolSourceFailed", unit=MetricUnit.Count, value=1)
            continue
        if toolset is not None:
            found.append(toolset)
    return found


def _turn_messages(turn: _Turn) -> list[dict[str, object]]:
    return [user_message(turn.message), *turn.loop.new_messages]


# Run kinds whose prompt a person did not type in the chat: their user message is stored with a
# `meta` beside its Anthropic blocks (the session API shows it; the model is never sent it).
_LABELLED_KINDS = ("heartbeat", "manual")


def _stored_turn_messages(turn: _Turn) -> list[dict[str, object]]:
    """The turn's messages as the transcript keeps them: a scheduled or manual run's prompt
    carries `meta` (its run's kind, trigger and id)."""
    messages = _turn_messages(turn)
    if turn.run.kind in _LABELLED_KINDS:
        meta = {"kind": turn.run.kind, "trigger": turn.run.trigger, "runId": turn.run.id}
        messages[0] = {**messages[0], "meta": meta}
    return messages


def _session_changes(turn: _Turn, conversation: Conversation) -> dict[str, object]:
    session = turn.session or SessionState()
    changes = conversation.changes(session, turn.run.id)
    counters = {counter: session.counters.get(counter, 0) + 1 for counter in turn.plan.session_counters}
    title = None if session.title else session_title(turn.message)
    return replace(changes, counters=counters, title=title).attributes()


def session_title(message: str) -> str:
    """The first TITLE_CHARS characters of a session's first message, unless the message holds a
    secret: the transcript keeps it, a title (shown in every list) gets UNTITLED instead. The scan
    reads a bounded prefix, long enough to hold any secret that reaches into the title."""
    if find_secret(message[:TITLE_SCAN_CHARS]):
        return UNTITLED
    return message[:TITLE_CHARS]


def _commit(turn: _Turn, result: Mapping[str, object]) -> TurnOutcome:
    """One transaction: session counters and lease, run record, usage rows, the policies' items."""
    deps, loop = turn.deps, turn.loop
    before = turn.run.session_revision_before
    at = now_iso()
    run = turn.run.model_copy(
        update={
            "status": "succeeded",
            "updated_at": at,
            "finished_at": at,
            "session_revision_after": before + 1 if before is not None else None,
            "result": result,
            "usage": loop.usage,
            "tool_calls": audited(loop.tool_calls, turn.plan.approvals),
        }
    )
    changes: dict[str, Any] | None = None
    extra: list[dict[str, Any]] = []
    if turn.conversation is not None:
        changes = _session_changes(turn, turn.conversation)
        for policy in turn.plan.policies:
            extra += policy.commit_items(turn.ctx, _turn_messages(turn), run.updated_at)
    try:
        with timeline.committing(turn.ctx, deps, run, extra) as items:  # the run's timeline: a Put of the same write
            deps.runs.finish_turn(
                turn.tenant, run=run, usage_rows=_usage_rows(run, loop), session_changes=changes, extra_items=items
            )
    except Exception as err:
        # The transcript written for this turn stays in S3 but is never read: the session row
        # still names the previous run (conversations.transcripts), so nothing needs undoing.
        with within(turn.deadline + _FAILURE_GRACE_S):
            recorded = _fail(turn, err)
        raise _as_turn_failure(err, run.id if recorded else None) from err
    with within(turn.deadline + _FAILURE_GRACE_S):
        return _settle(turn, run)


def _settle(turn: _Turn, run: Run) -> TurnOutcome:
    """After the commit: background writes, metrics, the after-commit hooks (best-effort)."""
    loop = turn.loop
    _await_background(turn.ctx)
    _record_metrics(run, loop, turn.started, ok=True, per_agent=turn.deps.settings.usage_metrics_per_agent)
    outcome = TurnOutcome(run=run, reply=loop.reply, tool_calls=loop.tool_calls, messages=_turn_messages(turn), cut=turn.cut)
    for policy in turn.plan.policies:
        try:
            policy.after_commit(turn.ctx, outcome)
        except Exception:
            logger.exception("an after-commit hook failed; the turn stands", extra={"run_id": run.id})
    if turn.conversation is not None:
        turn.conversation.committed(run.id)  # the running summary's job after a cut (best-effort)
    return outcome


def _await_background(ctx: ToolContext) -> None:
    """Lambda may freeze the container once we return: let best-effort writes finish first."""
    for future in ctx.background:
        try:
            future.result(timeout=5)
        except Exception:
            logger.exception("a background write of the turn failed")


def _section_failed(name: str, err: Exception) -> None:
    logger.warning("prompt section left out", extra={"section": name, "error": repr(err)})
    metrics.add_metric(name="PromptSectionFailed", unit=MetricUnit.Count, value=1)


def _fail(turn: _Turn, err: Exception) -> bool:
    """Records the failed run (and the tokens it spent) and frees the session; history is
    untouched. Returns whether the run record was written; the lease is freed either way."""
    if getattr(err, "code", None) == "outcome_unknown":  # a commit sent, unanswered, unreadable: nothing over it
        return True
    error = error_of(err)
    loop = turn.loop
    at = now_iso()
    failed = turn.run.model_copy(
        update={
            "status": "failed",
            "updated_at": at,
            "finished_at": at,
            "session_revision_after": turn.run.session_revision_before,
            "result": {"reply": loop.reply} if loop.reply else None,
            "usage": loop.usage,
            "tool_calls": loop.tool_calls,
            "error": error,
        }
    )
    # The detail stays in the logs, under the run id; the record and the client get error_of's.
    logger.warning("turn failed", extra={"run_id": failed.id, "code": error["code"], "error": repr(err)})
    recorded = True
    try:
        with timeline.committing(turn.ctx, turn.deps, failed, [], error=str(error["code"])) as items:
            turn.deps.runs.finish_turn(
                turn.tenant, run=failed, usage_rows=_usage_rows(failed, loop), session_changes=None, extra_items=items
            )
    except Exception:
        logger.exception("could not record the failed run", extra={"run_id": failed.id})
        recorded = False
        if turn.plan.session_id is not None:  # freeing the lease now lets the next turn in at once
            _release_quietly(turn.deps, turn.tenant, turn.ctx.agent.id, turn.plan.session_id, turn.run.id)
    _record_metrics(failed, loop, None, ok=False, per_agent=turn.deps.settings.usage_metrics_per_agent)
    return recorded


def _as_turn_failure(err: Exception, run_id: str | None) -> TurnFailed:
    if isinstance(err, EngramError):
        return TurnFailed(err.message, run_id=run_id, code=err.code, status=err.status, context=err.context)
    error = error_of(err)
    status = StorageUnavailable.status if error["code"] == StorageUnavailable.code else 500
    return TurnFailed(str(error["message"]), run_id=run_id, code=str(error["code"]), status=status)
