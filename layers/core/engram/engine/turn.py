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
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from engram.agents.models import Agent
from engram.agents.ports import Agents
from engram.aws.deadline import OutOfTime, remaining, within
from engram.conversations.ports import Sessions, Transcripts
from engram.engine.cache import CachePolicy
from engram.engine.events import TurnEvents
from engram.engine.lease import LeaseKeeper
from engram.engine.loop import LoopResult, run_loop
from engram.engine.prompt import (
    AddedMemory,
    MemorySnapshot,
    PromptSection,
    build_system,
    fit_sections,
    message_digest,
    session_context,
    session_memory,
    session_summary,
    snapshot_budget,
    start_sections,
)
from engram.engine.providers.base import ModelProvider
from engram.engine.tools import TURN_MESSAGE, ToolContext, ToolDeps, ToolRegistry, ToolSet, ToolSource
from engram.engine.trim import sequence_problems, trim_history, trim_in_steps
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
from engram.kernel.state import TurnState
from engram.runs.models import Run
from engram.runs.ports import Runs
from engram.usage.models import UsageRow

_RELEASE_TRIES = 3  # a release refused by a short outage is tried again within the grace
TITLE_CHARS = 60
TITLE_SCAN_CHARS = 4_000  # longer than any key format whose first 60 characters alone give it away
UNTITLED = "Untitled session"
_COMMIT_RESERVE_S = 2.0  # of the budget, kept for the transcript PUT and the commit
_FAILURE_GRACE_S = 3.0  # past the budget, to record a failure: still inside API Gateway's 30 s


class TurnPolicy:
    """A feature's hooks into a turn; every hook is optional (the defaults do nothing)."""

    def prepare(self, ctx: ToolContext) -> None:
        """I/O the turn needs before the model runs; runs beside the transcript GET."""

    def persona(self, ctx: ToolContext) -> list[str]:
        """Paragraphs appended to the cached persona block."""
        return []

    def finish(self, ctx: ToolContext, loop: LoopResult, result: dict[str, object]) -> None:
        """After the loop, before the commit: add to the run's result, or raise to fail the turn."""

    def commit_items(self, ctx: ToolContext, messages: list[dict[str, object]], at: str) -> list[dict[str, object]]:
        """Items written in the turn's own commit transaction (session turns only)."""
        return []

    def after_commit(self, ctx: ToolContext, outcome: TurnOutcome) -> None:
        """Best-effort work once the turn is committed; it must never fail the turn."""


@dataclass
class TurnPlan:
    """How one turn runs, chosen by its caller (a chat turn, a heartbeat, a council member, ...)."""

    # None: a clean slate (no session, no lease, no transcript read or written).
    session_id: str | None
    run_id: str | None = None
    # Fields of the run record the engine writes but does not interpret (kind, trigger, createdAt,
    # parentRunId, councilRunId).
    run_fields: dict[str, Any] = field(default_factory=dict)
    budget_s: float | None = None
    # time.monotonic() when the budget started: a request's arrival (it may have waited before
    # the turn ran); None: when the turn starts.
    started: float | None = None
    wait_s: float | None = None
    agent: Agent | None = None  # when the caller has read it already
    session_counters: tuple[str, ...] = ()  # session attributes a successful turn counts up by one
    system_blocks: list[str] = field(default_factory=list)  # run-specific instructions, last and uncached
    tool_state: TurnState = field(default_factory=dict)  # what the plan's tools read from ToolContext.state
    policies: list[TurnPolicy] = field(default_factory=list)
    cache: CachePolicy = field(default_factory=CachePolicy)  # the TTLs of the prompt cache markers
    # Who watches the turn (ST2): its events as they happen; None streams nothing and costs nothing.
    events: TurnEvents | None = None


@dataclass
class TurnOutcome:
    run: Run
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # Every message of the turn: the user's and what the model and its tools added.
    messages: list[dict[str, Any]] = field(default_factory=list)
    cut: int = 0  # messages the history cap cut from the session's transcript in this turn (CM8)

    def public(self) -> dict[str, object]:
        return {
            "runId": self.run.id,
            "sessionId": self.run.session_id,
            "reply": self.reply,
            "toolCalls": [public_tool_call(c) for c in self.tool_calls],
            "usage": self.run.usage.model_dump(by_alias=True),
        }


# What a turn's answer and the run record show of each tool call beside name, input and result.
TOOL_CALL_DETAILS = ("isError", "connection", "tool", "durationMs", "bytes", "error", "truncated", "fullResultKept")


def public_tool_call(call: Mapping[str, object]) -> dict[str, object]:
    return {
        "name": call["name"],
        "input": call["input"],
        "result": call["result"],
        **{key: call[key] for key in TOOL_CALL_DETAILS if key in call and (key != "isError" or call[key])},
    }


class TurnDeps(ToolDeps, Protocol):
    """What the engine needs from its composition root (wiring.ModelDeps provides it): what its
    tools may rely on (settings, the pool) and the stores and parts of a turn."""

    @property
    def agents(self) -> Agents: ...
    @property
    def sessions(self) -> Sessions: ...
    @property
    def history(self) -> Transcripts: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def registry(self) -> ToolRegistry: ...
    @property
    def sections(self) -> list[PromptSection]: ...
    @property
    def provider(self) -> ModelProvider: ...
    @property
    def tool_sources(self) -> list[ToolSource]: ...


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
    session: dict[str, Any] | None
    started: float
    deadline: float
    loop: LoopResult = field(default_factory=LoopResult)
    history: Any = None
    context_from: int = 0
    loaded: dict[str, Future[Any]] = field(default_factory=dict)  # the memory sections' reads
    prepared: list[Future[None]] = field(default_factory=list)  # the policies' reads
    toolsets: list[Future[ToolSet | None]] = field(default_factory=list)  # the agent's external tools
    snapshot: MemorySnapshot | None = None  # a new memory snapshot for the session row
    summary_shown: dict[str, Any] | None = None  # the summary parts now in the system prompt, for the session row
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
    except Exception as err:
        # A busy session is retried (the queue redelivers the job): not the end of the turn.
        if events is not None and not isinstance(err, SessionBusy):
            events.failed({**error_of(err), **({"runId": err.run_id} if isinstance(err, TurnFailed) and err.run_id else {})})
        raise
    if events is not None:
        events.completed(outcome.public())
    return outcome


def _run_started(turn: _Turn) -> TurnOutcome:
    deps, plan = turn.deps, turn.plan
    try:
        if plan.events is not None:
            run = turn.run  # what a watcher shows of a turn it did not start: who and why
            plan.events.started(
                agent_id=run.agent_id,
                session_id=run.session_id or "",
                kind=run.kind,
                trigger=run.trigger,
                message=turn.message,
            )
        sent = _load_context(turn)
        summary, sent = _summary(turn, sent)
        memory_text, added, sent = _memory(turn, sent, summary_parts=len(summary))
        context = session_context(summary, added)
        system = build_system(
            turn.ctx.agent,
            memory_text,
            persona_extra=[line for p in plan.policies for line in p.persona(turn.ctx)],
            extra="\n\n".join(plan.system_blocks) or None,
            session_blocks=context,
        )
        settings = deps.settings
        run_loop(
            provider=deps.provider,
            registry=deps.registry,
            ctx=turn.ctx,
            model=turn.ctx.agent.model,
            system=system,
            messages=sent,
            max_tokens=settings.max_output_tokens,
            max_rounds=settings.max_tool_rounds,
            # The model stops early enough for the transcript PUT and the commit to fit.
            deadline=turn.deadline - min(_COMMIT_RESERVE_S, (turn.deadline - turn.started) * 0.2),
            model_timeout=settings.model_timeout_s,
            result=turn.loop,
            cache=plan.cache,
            stable_blocks=len(user_message(turn.message)["content"]),
            memory_index=1 if memory_text else None,
            summary_index=(1 if memory_text else 0) + len(context) if context else None,
            events=plan.events,
        )
        result: dict[str, Any] = {"reply": turn.loop.reply}
        for policy in plan.policies:
            policy.finish(turn.ctx, turn.loop, result)
        new_etag, trimmed = _save_transcript(turn)
    except Exception as err:
        with within(turn.deadline + _FAILURE_GRACE_S):
            recorded = _fail(turn, err)
            _await_background(turn.ctx)
        raise _as_turn_failure(err, turn.run.id if recorded else None) from err
    return _commit(turn, result, new_etag, trimmed)


def _start(deps: TurnDeps, tenant: str, message: str, plan: TurnPlan, started: float, deadline: float) -> _Turn:
    budget = deadline - started
    run_id = plan.run_id or new_id("run")
    check_message(deps, message)
    agent_id = plan.run_fields.get("agent_id") or (plan.agent.id if plan.agent else "")
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
        session_revision_before=int(session.get("revision", 0)) if session is not None else None,
        model=agent.model,
        **{k: v for k, v in plan.run_fields.items() if k not in ("agent_id", "created_at") and v is not None},
    )
    ctx = ToolContext(
        tenant=tenant,
        agent=agent,
        session_id=plan.session_id or "",
        run_id=run_id,
        deps=deps,
        state={**plan.tool_state, TURN_MESSAGE: message},
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
    )
    if session is not None and plan.session_id is not None:
        ttl = deps.settings.session_lease_s
        turn.lease = LeaseKeeper(deps.sessions, tenant, agent.id, plan.session_id, run_id, ttl).start()
    # Memory sections and the policies' reads run in parallel with the transcript GET; sections are best-effort.
    turn.loaded = start_sections(deps.sections, ctx, deps.executor)
    turn.prepared = [deps.executor.submit(p.prepare, ctx) for p in plan.policies]
    turn.toolsets = [deps.executor.submit(source.toolset, ctx) for source in deps.tool_sources]
    return turn


def _load_agent_and_session(
    deps: TurnDeps, tenant: str, agent_id: str, plan: TurnPlan, run_id: str, budget: float
) -> tuple[Agent, dict[str, Any] | None]:
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
    """Frees a lease this turn took, retried if refused (it expires anyway), within the grace left of recording a failure."""
    give_up = time.monotonic() + min(_FAILURE_GRACE_S, max(remaining() or _FAILURE_GRACE_S, 0.5))
    for attempt in range(_RELEASE_TRIES):
        try:
            with within(give_up):
                deps.sessions.release_lease(tenant, agent_id, session_id, run_id)
            return
        except Exception:
            logger.warning("could not release the session lease", extra={"run_id": run_id, "attempt": attempt + 1}, exc_info=True)
        pause = 0.1 * 3**attempt
        if time.monotonic() + pause >= give_up:
            return
        time.sleep(pause)


def _context_start(session: dict[str, Any] | None, stored: int) -> int:
    """Active Memory reset: the model's context starts after the messages the session held at the
    reset; they stay in the transcript (visible), but are not sent."""
    start = int((session or {}).get("contextFrom", 0) or 0)
    return min(max(start, 0), stored)


def _load_context(turn: _Turn) -> list[dict[str, object]]:
    """The messages sent to the model: the session's context (if any) and the new message,
    trimmed to the cap and checked to be a valid sequence."""
    deps, plan = turn.deps, turn.plan
    if plan.session_id is not None:
        committed = (turn.session or {}).get("lastRunId")
        turn.history = deps.history.load(turn.tenant, turn.ctx.agent.id, plan.session_id, committed_run=committed)
        turn.context_from = _context_start(turn.session, len(turn.history.messages))
    for prepared in turn.prepared:
        prepared.result()
    turn.ctx.toolsets = _toolsets(turn)
    incoming = user_message(turn.message)
    earlier = turn.history.messages[turn.context_from :] if turn.history is not None else []
    # The stored history is within the cap (trimmed in steps when saved): the new message may
    # pass it by one until then, so the first message sent, and the cached prefix, stay put.
    sent = trim_history(earlier + [incoming], deps.settings.history_cap + 1).kept
    problems = sequence_problems(sent)
    if problems:
        # Never send an invalid sequence; start from this message alone rather than fail.
        logger.error("stored history is not a valid sequence", extra={"problems": problems[:5], "run_id": turn.run.id})
        sent = [incoming]
    return sent


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


def _summary(turn: _Turn, sent: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The session's running summary of what the cap cut (CM8; a clean slate has none): its system
    blocks, and the messages to send, a fold that landed after this history began shown after the
    user's words (engine.prompt.session_summary; sent only, never stored)."""
    if turn.history is None or not sent:
        return [], sent
    session = turn.session or {}
    view = session_summary(session.get("summary"), session.get("summaryShown"), message_digest(sent[0]))
    turn.summary_shown = view.shown
    if view.late:
        own = sent[-1]
        sent = [*sent[:-1], {**own, "content": [*own["content"], {"type": "text", "text": view.late}]}]
    return view.system, sent


def _memory(
    turn: _Turn, sent: list[dict[str, Any]], *, summary_parts: int
) -> tuple[str, tuple[AddedMemory, ...], list[dict[str, Any]]]:
    """The memory sections' text for the system prompt, the memory blocks added at cuts (after
    how many summary parts each goes), and the messages to send. A session turn keeps its
    session's snapshot and the blocks its cuts added (engine.prompt) and shows what was stored
    since after the user's words in its own message (sent only, never stored); a clean slate
    shows the sections as they are."""
    budget = turn.deps.settings.memory_sections_token_budget
    session = turn.history is not None and bool(sent)
    # A session's snapshot leaves room for the rows stored after it (engine.prompt.snapshot_budget).
    fitted = snapshot_budget(budget) if session else budget
    view = fit_sections(turn.deps.sections, turn.loaded, _section_failed, budget_tokens=fitted)
    if not session:
        return view.text, (), sent
    session_row = turn.session or {}
    stored = session_row.get("memorySnapshot")
    # How many messages the session has had, and at most how many more until the next cut
    # (engine.trim.trim_in_steps): the snapshot is kept at a cut when its room lasts that long.
    position = int(session_row.get("trimmedCount", 0) or 0) + len(turn.history.messages)
    cap = turn.deps.settings.history_cap
    memory = session_memory(
        view,
        stored,
        message_digest(sent[0]),
        budget_tokens=budget,
        position=position,
        until_cut=cap - max(2, cap // 2),
        summary_parts=summary_parts,
        idle_s=_idle_s(session_row.get("updatedAt")),
        deeper=lambda: _deeper_known(turn),
    )
    turn.snapshot = memory.store
    if memory.delta:
        own = sent[-1]
        sent = [*sent[:-1], {**own, "content": [*own["content"], {"type": "text", "text": memory.delta}]}]
    return memory.text, memory.added, sent


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


def _idle_s(updated_at: object) -> float | None:
    """Seconds since the session row was last written (its last turn), None when it does not say."""
    if not isinstance(updated_at, str):
        return None
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(updated_at)).total_seconds()
    except ValueError:
        return None


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


def _save_transcript(turn: _Turn) -> tuple[str | None, Any]:
    """The conditional PUT of a session turn's transcript (nothing for a clean slate)."""
    if turn.history is None or turn.plan.session_id is None:
        return None, None
    cap = turn.deps.settings.history_cap
    trimmed = trim_in_steps(turn.history.messages + _stored_turn_messages(turn), cap)
    turn.cut = len(trimmed.trimmed)
    cut, cut_from = _unsummarised(turn, trimmed.trimmed, keep=2 * cap)
    etag = turn.deps.history.save(
        turn.tenant,
        turn.ctx.agent.id,
        turn.plan.session_id,
        trimmed.kept,
        previous=turn.history,
        run_id=turn.run.id,
        cut=cut,
        cut_from=cut_from,
    )
    return etag, trimmed


def _unsummarised(turn: _Turn, trimmed: Sequence[Mapping[str, object]], *, keep: int) -> tuple[list[Any], int]:
    """The cut messages the running summary may not hold yet (CM8), kept in the transcript
    object until a summary covers them: those the session's summary does not cover, and those
    this turn cut. Numbered by the session's count of cut messages, so a summary that failed or
    came late is caught up by the next one. A message from before an Active Memory reset is
    kept as None (never summarised); at most `keep` (the newest)."""
    session = turn.session or {}
    before = int(session.get("trimmedCount", 0) or 0)
    summary = session.get("summary") if isinstance(session.get("summary"), dict) else {}
    floor = max(int((summary or {}).get("through", 0) or 0), int(session.get("summaryFrom", 0) or 0))
    history = turn.history
    # Messages numbered below the committed count are the same in any version of the object.
    by_number: dict[int, Any] = {
        history.cut_from + k: m for k, m in enumerate(history.cut) if floor <= history.cut_from + k < before
    }
    for k, message in enumerate(trimmed):
        by_number[before + k] = None if k < turn.context_from else message
    if not by_number:
        return [], 0
    start = max(min(by_number), before + len(trimmed) - keep)
    return [by_number.get(n) for n in range(start, before + len(trimmed))], start


def _session_changes(turn: _Turn, trimmed: Any) -> dict[str, object]:
    session = turn.session or {}
    revision = int(session.get("revision", 0))
    changes: dict[str, Any] = {"revision": revision + 1, "messageCount": len(trimmed.kept), "lastRunId": turn.run.id}
    if turn.cut:
        changes["trimmedCount"] = int(session.get("trimmedCount", 0) or 0) + turn.cut
    if turn.context_from:
        # Trimming drops the oldest messages; the context start moves with them.
        dropped = len(turn.history.messages) + len(_turn_messages(turn)) - len(trimmed.kept)
        changes["contextFrom"] = max(0, turn.context_from - dropped)
    for counter in turn.plan.session_counters:
        changes[counter] = int(session.get(counter, 0) or 0) + 1
    if turn.snapshot is not None:
        changes["memorySnapshot"] = turn.snapshot.stored()
    if turn.summary_shown is not None:
        changes["summaryShown"] = turn.summary_shown
    if not session.get("title"):
        changes["title"] = session_title(turn.message)
    return changes


def session_title(message: str) -> str:
    """The first TITLE_CHARS characters of a session's first message, unless the message holds a
    secret: the transcript keeps it, a title (shown in every list) gets UNTITLED instead. The scan
    reads a bounded prefix, long enough to hold any secret that reaches into the title."""
    if find_secret(message[:TITLE_SCAN_CHARS]):
        return UNTITLED
    return message[:TITLE_CHARS]


def _commit(turn: _Turn, result: Mapping[str, object], new_etag: str | None, trimmed: object) -> TurnOutcome:
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
            "tool_calls": loop.tool_calls,
        }
    )
    changes: dict[str, Any] | None = None
    extra: list[dict[str, Any]] = []
    if turn.history is not None:
        changes = _session_changes(turn, trimmed)
        for policy in turn.plan.policies:
            extra += policy.commit_items(turn.ctx, _turn_messages(turn), run.updated_at)
    try:
        deps.runs.finish_turn(turn.tenant, run=run, usage_rows=_usage_rows(run, loop), session_changes=changes, extra_items=extra)
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
    _record_metrics(run, loop, turn.started, ok=True)
    outcome = TurnOutcome(run=run, reply=loop.reply, tool_calls=loop.tool_calls, messages=_turn_messages(turn), cut=turn.cut)
    for policy in turn.plan.policies:
        try:
            policy.after_commit(turn.ctx, outcome)
        except Exception:
            logger.exception("an after-commit hook failed; the turn stands", extra={"run_id": run.id})
    return outcome


def _usage_rows(run: Run, loop: LoopResult) -> list[UsageRow]:
    """Usage of a session turn is keyed by its session; a clean-slate turn is its own session."""
    return [
        UsageRow(
            id=f"{run.id}-{i}",
            created_at=run.updated_at,
            agent_id=run.agent_id,
            session_key=run.session_id or run.id,
            run_id=run.id,
            model=model,
            **usage.model_dump(),
        )
        for i, (model, usage) in enumerate(sorted(loop.usage_by_model.items()))
    ]


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
        turn.deps.runs.finish_turn(turn.tenant, run=failed, usage_rows=_usage_rows(failed, loop), session_changes=None)
    except Exception:
        logger.exception("could not record the failed run", extra={"run_id": failed.id})
        recorded = False
        if turn.plan.session_id is not None:  # freeing the lease now lets the next turn in at once
            _release_quietly(turn.deps, turn.tenant, turn.ctx.agent.id, turn.plan.session_id, turn.run.id)
    _record_metrics(failed, loop, None, ok=False)
    return recorded


def _as_turn_failure(err: Exception, run_id: str | None) -> TurnFailed:
    if isinstance(err, EngramError):
        return TurnFailed(err.message, run_id=run_id, code=err.code, status=err.status)
    error = error_of(err)
    status = StorageUnavailable.status if error["code"] == StorageUnavailable.code else 500
    return TurnFailed(error["message"], run_id=run_id, code=error["code"], status=status)


def _record_metrics(run: Run, loop: LoopResult, started: float | None, *, ok: bool) -> None:
    metrics.add_metric(name="TurnSucceeded" if ok else "TurnFailed", unit=MetricUnit.Count, value=1)
    if started is not None:
        metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=(time.monotonic() - started) * 1000)
    usage = loop.usage
    metrics.add_metric(name="InputTokens", unit=MetricUnit.Count, value=usage.input_tokens)
    metrics.add_metric(name="OutputTokens", unit=MetricUnit.Count, value=usage.output_tokens)
    metrics.add_metric(name="CacheReadTokens", unit=MetricUnit.Count, value=usage.cache_read_tokens)
    metrics.add_metric(name="CostUsd", unit=MetricUnit.NoUnit, value=usage.cost_usd)
