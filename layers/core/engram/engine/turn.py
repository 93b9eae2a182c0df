"""A chat turn, applied atomically: history, run record and usage change together or not at all.

Hot path (DESIGN §6): agent read and session lease in parallel (2 DynamoDB calls), one S3 GET,
the model, one conditional S3 PUT, one DynamoDB transaction (session + run + usage), then the
extraction job (one SQS send) after the reply is settled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from engram.engine.loop import LoopResult, run_loop
from engram.engine.prompt import build_system, start_sections
from engram.engine.tools import ToolContext
from engram.cards.service import find_card_type
from engram.deps import Deps
from engram.kernel.errors import EngramError, NoCard, NotFound, PayloadTooLarge, SessionBusy, TurnFailed, error_of
from engram.kernel.ids import new_id
from engram.engine.trim import sequence_problems, trim_history
from engram.agents.models import Agent
from engram.runs.models import Run
from engram.engine.pricing import Usage
from engram.usage.models import UsageRow
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics

_LEASE_MARGIN_S = 5
_EXTRACT_JOB_MAX_BYTES = 200_000  # SQS allows 256 KiB; keep room for the envelope


@dataclass
class TurnRequest:
    tenant: str
    agent_id: str
    # None: a clean-slate run (heartbeats without Active Memory, council members, re-examinations):
    # no session, no lease, no transcript read or written; the run record keeps what it did.
    session_id: str | None
    message: str
    run_id: str | None = None
    kind: str = "chat"
    trigger: str = "api"
    created_at: str | None = None
    budget_s: float | None = None
    wait_s: float | None = None
    # Runs (runs.py) pass what they already know or need beyond a chat turn.
    agent: Agent | None = None
    parent_run_id: str | None = None
    council_run_id: str | None = None
    extra_system: str | None = None  # run-specific instructions (team roster, learnings, ...)
    card_type: Any = None  # overrides the agent's card type (re-examination cards)
    require_card: bool = False  # a run whose purpose is its card fails without a valid one
    run_memory: Any = None  # the run's scratch store (memory_list / memory_read / memory_write)
    counts_for_active_memory: bool = False  # a heartbeat or manual run on the shared session
    extraction: bool = True  # council members are extracted once, as the chain
    chain_id: str | None = None  # a council run: one extraction over the chain, memory-extract:chain:<id8>
    chain_messages: list[dict[str, Any]] = field(default_factory=list)  # the members' replies, for it


@dataclass
class TurnResult:
    run: Run
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        return {
            "runId": self.run.id,
            "sessionId": self.run.session_id,
            "reply": self.reply,
            "toolCalls": [{"name": c["name"], "input": c["input"], "result": c["result"]} for c in self.tool_calls],
            "usage": self.run.usage.model_dump(by_alias=True),
        }


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def check_message(deps: Deps, message: str) -> None:
    limit = deps.settings.message_max_chars
    if len(message) > limit:
        raise PayloadTooLarge(f"message is {len(message)} characters; the limit is {limit}", field="message", code="message_too_long")


def acquire_session(deps: Deps, t: str, agent_id: str, session_id: str, owner: str, ttl_s: float, wait_s: float,
                    busy_message: str) -> dict[str, Any]:
    """Takes the session's lease for `owner`, waiting up to `wait_s` (with backoff) while another
    turn, run or reset holds it; then SessionBusy with `busy_message`."""
    give_up = time.monotonic() + wait_s
    pause = 0.05
    while True:
        try:
            return deps.sessions.acquire_lease(t, agent_id, session_id, owner, ttl_s)
        except SessionBusy:
            if time.monotonic() + pause > give_up:
                raise SessionBusy(busy_message, field="sessionId") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def _usage_rows(run: Run, loop: LoopResult) -> list[UsageRow]:
    """Usage of a session run is keyed by its session; a clean-slate run is its own session."""
    rows = []
    for i, (model, usage) in enumerate(sorted(loop.usage_by_model.items())):
        rows.append(
            UsageRow(
                id=f"{run.id}-{i}",
                created_at=run.updated_at,
                agent_id=run.agent_id,
                session_key=run.session_id or run.id,
                run_id=run.id,
                model=model,
                **usage.model_dump(),
            )
        )
    return rows


def _load_agent_and_session(deps: Deps, req: TurnRequest, run_id: str, budget: float) -> tuple[Agent, dict[str, Any] | None]:
    """The agent (one GetItem unless the caller has it) and, for a session run, the session lease
    taken in parallel with it. A clean-slate run has no session."""
    if req.session_id is None:
        agent = req.agent or deps.agents.get(req.tenant, req.agent_id)
        if agent is None:
            raise NotFound("agent not found", field="agentId")
        return agent, None
    agent_future = None if req.agent else deps.executor.submit(deps.agents.get, req.tenant, req.agent_id)
    try:
        session = acquire_session(
            deps, req.tenant, req.agent_id, req.session_id, run_id, budget + _LEASE_MARGIN_S,
            deps.settings.session_wait_s if req.wait_s is None else req.wait_s,
            "another turn is running on this session; retry when it finishes or use ?async=true",
        )
    except NotFound:
        if (req.agent or agent_future.result()) is None:  # type: ignore[union-attr]
            raise NotFound("agent not found", field="agentId") from None
        raise
    agent = req.agent or agent_future.result()  # type: ignore[union-attr]
    if agent is None:
        deps.sessions.release_lease(req.tenant, req.agent_id, req.session_id, run_id)
        raise NotFound("agent not found", field="agentId")
    return agent, session


def _context_start(session: dict[str, Any] | None, stored: int) -> int:
    """Active Memory reset (AM2): the model's context starts after the messages the session held
    at the reset; they stay in the transcript (visible), but are not sent."""
    start = int((session or {}).get("contextFrom", 0) or 0)
    return min(max(start, 0), stored)


def run_turn(deps: Deps, req: TurnRequest) -> TurnResult:
    settings = deps.settings
    started = time.monotonic()
    budget = req.budget_s or settings.sync_turn_budget_s
    deadline = started + budget
    run_id = req.run_id or new_id("run")
    check_message(deps, req.message)

    agent, session = _load_agent_and_session(deps, req, run_id, budget)
    revision_before = int(session.get("revision", 0)) if session is not None else None
    run = Run(
        id=run_id,
        created_at=req.created_at or now_iso(),
        updated_at=now_iso(),
        agent_id=agent.id,
        kind=req.kind,  # type: ignore[arg-type]
        trigger=req.trigger,
        status="running",
        prompt=req.message,
        session_id=req.session_id,
        session_revision_before=revision_before,
        parent_run_id=req.parent_run_id,
        council_run_id=req.council_run_id,
        model=agent.model,
    )
    loop = LoopResult()
    ctx = ToolContext(tenant=req.tenant, agent=agent, session_id=req.session_id or "", run_id=run_id, deps=deps,
                      run_memory=req.run_memory, run_kind=req.kind)
    # Memory sections read in parallel with the transcript GET; each is best-effort.
    loaded = start_sections(deps.sections, ctx, deps.executor)
    # A custom card type is one GetItem, beside the transcript GET; built-ins cost nothing.
    card_type_future = None
    if req.card_type is not None:
        ctx.card_type = req.card_type
    elif agent.card_type:
        card_type_future = deps.executor.submit(find_card_type, deps, req.tenant, agent.card_type)
    history = None
    context_from = 0
    try:
        if req.session_id is not None:
            history = deps.history.load(req.tenant, agent.id, req.session_id)
            context_from = _context_start(session, len(history.messages))
        if card_type_future is not None:
            ctx.card_type = card_type_future.result()
            if ctx.card_type is None:
                logger.warning("the agent's card type no longer exists; no submit_result this run", extra={"card_type": agent.card_type})
        incoming = user_message(req.message)
        earlier = history.messages[context_from:] if history is not None else []
        sent = trim_history(earlier + [incoming], settings.history_cap).kept
        problems = sequence_problems(sent)
        if problems:
            # Never send an invalid sequence; start from this message alone rather than fail.
            logger.error("stored history is not a valid sequence", extra={"problems": problems[:5], "run_id": run_id})
            sent = [incoming]
        system = build_system(agent, deps.sections, loaded, on_error=_section_failed,
                              card_type_name=ctx.card_type.name if ctx.card_type is not None else None, extra=req.extra_system)
        run_loop(
            provider=deps.provider,
            registry=deps.registry,
            ctx=ctx,
            model=agent.model,
            system=system,
            messages=sent,
            max_tokens=settings.max_output_tokens,
            max_rounds=settings.max_tool_rounds,
            deadline=deadline,
            model_timeout=settings.model_timeout_s,
            result=loop,
        )
        if req.require_card and ctx.card is None:
            raise NoCard("the run ended without a valid result card (submit_result was not accepted)", field="card", code="no_card")
        new_etag = None
        if history is not None:
            all_messages = history.messages + [incoming] + loop.new_messages
            trimmed = trim_history(all_messages, settings.history_cap)
            new_etag = deps.history.save(req.tenant, agent.id, req.session_id, trimmed.kept, etag=history.etag)
    except Exception as err:
        _fail(deps, req, run, loop, err)
        _await_background(ctx)
        raise _as_turn_failure(err, run_id) from err

    run = run.model_copy(
        update={
            "status": "succeeded",
            "updated_at": now_iso(),
            "session_revision_after": revision_before + 1 if revision_before is not None else None,
            "result": _result(agent, ctx, loop),
            "usage": loop.usage,
            "tool_calls": loop.tool_calls,
        }
    )
    changes: dict[str, Any] | None = None
    archived: list[dict[str, Any]] = []
    if history is not None:
        assert session is not None and revision_before is not None and req.session_id is not None
        changes = {"revision": revision_before + 1, "messageCount": len(trimmed.kept), "lastRunId": run_id}
        if context_from:
            # Trimming drops the oldest messages; the context start moves with them.
            changes["contextFrom"] = max(0, context_from - (len(all_messages) - len(trimmed.kept)))
        if req.counts_for_active_memory:
            changes["runsSinceReset"] = int(session.get("runsSinceReset", 0) or 0) + 1
        if not session.get("title"):
            changes["title"] = req.message[:60]
        # The turn's messages join the conversation archive in the same transaction (no extra call).
        archived = deps.archive.items_for_turn(req.tenant, agent.id, req.session_id, run_id, [incoming] + loop.new_messages, run.updated_at)
    try:
        deps.runs.finish_turn(req.tenant, run=run, usage_rows=_usage_rows(run, loop), session_changes=changes, extra_items=archived)
    except Exception as err:
        if history is not None:
            # The transcript is already written: put the previous one back so the turn stays all-or-nothing.
            deps.history.restore(req.tenant, agent.id, req.session_id, history, written_etag=new_etag)
        _fail(deps, req, run, loop, err)
        raise _as_turn_failure(err, run_id) from err
    _await_background(ctx)
    _record_metrics(run, loop, started, ok=True)
    if req.extraction:
        _enqueue_extraction(deps, req, agent, run, req.chain_messages + [incoming] + loop.new_messages, chain_id=req.chain_id)
    return TurnResult(run=run, reply=loop.reply, tool_calls=loop.tool_calls)


def _result(agent: Agent, ctx: ToolContext, loop: LoopResult) -> dict[str, Any]:
    """A run's result: the reply, and when the run had a card type the card it submitted."""
    if ctx.card_type is None and not agent.card_type:
        return {"reply": loop.reply}
    name = ctx.card_type.name if ctx.card_type is not None else agent.card_type
    return {"reply": loop.reply, "card": ctx.card, "cardType": name}


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


def _fail(deps: Deps, req: TurnRequest, run: Run, loop: LoopResult, err: Exception) -> None:
    """Records the failed run (and the tokens it spent) and frees the session; history is untouched."""
    error = error_of(err)
    code, message = error["code"], error["message"]
    failed = run.model_copy(
        update={
            "status": "failed",
            "updated_at": now_iso(),
            "session_revision_after": run.session_revision_before,
            "result": {"reply": loop.reply} if loop.reply else None,
            "usage": loop.usage,
            "tool_calls": loop.tool_calls,
            "error": error,
        }
    )
    logger.warning("turn failed", extra={"run_id": run.id, "code": code, "error": message})
    try:
        deps.runs.finish_turn(req.tenant, run=failed, usage_rows=_usage_rows(failed, loop), session_changes=None)
    except Exception:  # the lease expires on its own; the original error is what the caller needs
        logger.exception("could not record the failed run", extra={"run_id": run.id})
    _record_metrics(failed, loop, None, ok=False)


def _as_turn_failure(err: Exception, run_id: str) -> TurnFailed:
    if isinstance(err, EngramError):
        return TurnFailed(err.message, run_id=run_id, code=err.code, status=err.status)
    return TurnFailed("the turn failed unexpectedly", run_id=run_id, code="internal_error", status=500)


def _record_metrics(run: Run, loop: LoopResult, started: float | None, *, ok: bool) -> None:
    metrics.add_metric(name="TurnSucceeded" if ok else "TurnFailed", unit=MetricUnit.Count, value=1)
    if started is not None:
        metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=(time.monotonic() - started) * 1000)
    usage: Usage = loop.usage
    metrics.add_metric(name="InputTokens", unit=MetricUnit.Count, value=usage.input_tokens)
    metrics.add_metric(name="OutputTokens", unit=MetricUnit.Count, value=usage.output_tokens)
    metrics.add_metric(name="CacheReadTokens", unit=MetricUnit.Count, value=usage.cache_read_tokens)
    metrics.add_metric(name="CostUsd", unit=MetricUnit.NoUnit, value=usage.cost_usd)


def _enqueue_extraction(deps: Deps, req: TurnRequest, agent: Agent, run: Run, transcript: list[dict[str, Any]],
                        *, chain_id: str | None = None) -> None:
    """Best-effort and after the turn is committed: extraction must never fail or change a turn."""
    import json

    if not agent.workspace_id and not agent.agent_memory:
        return  # extraction could store nothing (EX3): no job, no SQS call

    job: dict[str, Any] = {
        "runId": run.id,
        "tenant": req.tenant,
        "agentId": agent.id,
        # A clean-slate run is its own session: its cost lands under memory-extract:<runId>.
        "sessionId": req.session_id or run.id,
        "workspaceId": agent.workspace_id,
        "kind": run.kind,
        "messages": transcript,
    }
    if chain_id:
        job["chainId"] = chain_id  # council runs: memory-extract:chain:<id8>
    while len(json.dumps(job, ensure_ascii=False).encode()) > _EXTRACT_JOB_MAX_BYTES:
        if req.session_id is not None:
            job["messages"] = None  # the worker reads the session instead
            job["truncated"] = True
            break
        # No session to read back: keep the end (extraction caps the transcript at its end anyway).
        job["messages"] = job["messages"][len(job["messages"]) // 2 + 1:] or [transcript[-1]]
        job["truncated"] = True
        if len(job["messages"]) == 1:
            break
    try:
        deps.queues.enqueue_extraction(job)
    except Exception:
        logger.exception("could not enqueue extraction", extra={"run_id": run.id})
        metrics.add_metric(name="ExtractionEnqueueFailed", unit=MetricUnit.Count, value=1)
