"""What a turn's caller chooses (`TurnPlan`, with the features' `TurnPolicy` hooks) and what it gets
back (`TurnOutcome`); engine.turn runs it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from engram.agents.models import Agent
from engram.engine.cache import CachePolicy
from engram.engine.events import TurnEvents
from engram.engine.loop import LoopResult
from engram.engine.tools import ToolContext
from engram.kernel.observability import MetricUnit, metrics
from engram.kernel.state import TurnState
from engram.runs.models import Run
from engram.usage.models import Usage, UsageRow
from engram.usage.totals import emit_metrics


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

    def paused(self, ctx: ToolContext, outcome: TurnOutcome) -> None:
        """Best-effort work once the turn paused for its owner's approval (TL10), e.g. telling them."""


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
    # TL10: what the caller needs to build this plan again when a paused turn resumes (JSON, stored
    # with the paused turn); and, for a resumed turn, the turn as it paused and its decided approvals.
    resume_data: dict[str, Any] = field(default_factory=dict)
    resume: PausedTurn | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    pausable: bool = True  # False: a call that needs approval fails the turn (a council's member)


class PausedTurn(BaseModel):
    """A turn stopped before tool calls its owner must approve (TL10), as the run record keeps it
    (`Run.paused`): the user's message, the messages the model and its tools added so far (the
    last, the answer asking for the held calls), the results of that answer's other calls, the
    held tool_use blocks, the calls and usage so far, the events' sequence, and what rebuilds the
    plan (`plan`: session, run fields, system blocks, counters and the caller's `resume_data`)."""

    model_config = ConfigDict(defer_build=True)

    message: str
    new_messages: list[dict[str, Any]]
    obtained: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    usage_by_model: dict[str, dict[str, Any]]
    reply: str
    seq: int
    plan: dict[str, Any]


@dataclass
class TurnOutcome:
    run: Run
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # Every message of the turn: the user's and what the model and its tools added.
    messages: list[dict[str, Any]] = field(default_factory=list)
    cut: int = 0  # messages the history cap cut from the session's transcript in this turn (CM8)

    def public(self) -> dict[str, object]:
        if self.run.status == "awaiting_approval":  # TL10: paused; the answer comes when it resumes
            return {
                "runId": self.run.id,
                "sessionId": self.run.session_id,
                "status": self.run.status,
                "pendingApprovals": self.run.pending_approvals,
                "toolCalls": [public_tool_call(c) for c in self.tool_calls],
                "usage": self.run.usage.model_dump(by_alias=True),
            }
        return {
            "runId": self.run.id,
            "sessionId": self.run.session_id,
            "reply": self.reply,
            "toolCalls": [public_tool_call(c) for c in self.tool_calls],
            "usage": self.run.usage.model_dump(by_alias=True),
        }


# What a turn's answer and the run record show of each tool call beside name, input and result.
TOOL_CALL_DETAILS = (
    "isError",
    "connection",
    "tool",
    "durationMs",
    "bytes",
    "error",
    "truncated",
    "fullResultKept",
    # TL10's audit: who decided a held call, when, why; digests of what went in and came out
    "decision",
    "decidedBy",
    "decidedAt",
    "note",
    "inputSha256",
    "resultSha256",
)


def public_tool_call(call: Mapping[str, object]) -> dict[str, object]:
    return {
        "name": call["name"],
        "input": call["input"],
        "result": call["result"],
        **{key: call[key] for key in TOOL_CALL_DETAILS if key in call and (key != "isError" or call[key])},
    }


def usage_rows(run: Run, loop: LoopResult) -> list[UsageRow]:
    """Usage of a session turn is keyed by its session; a clean-slate turn is its own session. A
    resumed turn (TL10) records what it spent since its pause (`loop.spent_before` was recorded
    then), under ids of its own: each spend is one row set, when it happened."""
    before, part = loop.spent_before, f"-{loop.segment}" if loop.segment else ""
    rows = []
    for i, (model, usage) in enumerate(sorted(loop.usage_by_model.items())):
        earlier = before.get(model)
        spent = usage if earlier is None else Usage(**{f: getattr(usage, f) - getattr(earlier, f) for f in Usage.model_fields})
        if earlier is not None and spent == Usage():
            continue
        row = UsageRow(id=f"{run.id}{part}-{i}", created_at=run.updated_at, agent_id=run.agent_id, session_key=run.session_id or run.id, run_id=run.id, model=model, **spent.model_dump())  # fmt: skip
        rows.append(row)
    return rows


def record_metrics(run: Run, loop: LoopResult, started: float | None, *, ok: bool, per_agent: bool = False) -> None:
    metrics.add_metric(name="TurnSucceeded" if ok else "TurnFailed", unit=MetricUnit.Count, value=1)
    if started is not None:
        metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=(time.monotonic() - started) * 1000)
    usage = loop.usage
    metrics.add_metric(name="InputTokens", unit=MetricUnit.Count, value=usage.input_tokens)
    metrics.add_metric(name="OutputTokens", unit=MetricUnit.Count, value=usage.output_tokens)
    metrics.add_metric(name="CacheReadTokens", unit=MetricUnit.Count, value=usage.cache_read_tokens)
    metrics.add_metric(name="CostUsd", unit=MetricUnit.NoUnit, value=usage.cost_usd)
    if loop.usage_by_model:
        emit_metrics(run.kind, run.agent_id, usage, per_agent=per_agent)
