"""What the engine records of a turn in its timeline (OB1, engram.kernel.trace): the turn itself
(invoke_agent), each model call (chat), each tool call (execute_tool), the memory sections' reads,
the lease wait, the transcript GET and PUT and the commit. engine.turn and engine.loop call these
in a line each; nothing here does I/O, and OpenTelemetry is loaded only when the stack exports
(`export`, OB2)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from engram.agents.models import Agent
from engram.engine.prompt import PromptSection, estimate_tokens
from engram.engine.providers.base import ModelResponse
from engram.engine.tools import ToolContext, ToolOutcome
from engram.kernel import trace as t
from engram.kernel.observability import logger
from engram.kernel.settings import Settings
from engram.kernel.state import StateKey
from engram.runs.models import Run
from engram.runs.ports import Runs
from engram.usage.models import Usage

# The execute_tool span of the registry tool running now (they run one after another): a tool
# that writes memory records its write under it (memory_write_span).
TOOL_SPAN = StateKey[t.Span]("tool_span")


TRACE = t.TRACE  # the turn's trace in ToolContext.state


@contextmanager
def lease_wait(run_id: str, session_id: str | None, run_fields: Mapping[str, object], started: float) -> Iterator[t.Trace]:
    """The turn's trace, begun, and the span of its first step: the session lease taken (with
    the agent read beside it), or a clean slate's agent read."""
    trace = begin_turn(run_id, session_id, run_fields, started)
    with step(trace, "lease.wait" if session_id else "agent.read") as span:
        span.set(engram__session__id=session_id)
        yield trace


def begin_turn(run_id: str, session_id: str | None, run_fields: Mapping[str, object], started: float) -> t.Trace:
    """The turn's trace and its root span (invoke_agent), from the turn's start (its request's
    arrival when it waited)."""
    kind = str(run_fields.get("kind") or "chat")
    trace = t.Trace(run_id)
    trace.mono_start = min(trace.mono_start, started)
    trace.wall_start -= time.monotonic() - trace.mono_start
    root = trace.start("invoke_agent", t.AGENT, span_id=trace.root_id, at=started)
    root.set(**{t.OPERATION: "invoke_agent", t.CONVERSATION_ID: session_id, "engram.run.id": run_id, "engram.run.kind": kind})
    # the run it worked for (a council member's lead, a re-examination's decision): its timeline is that run's
    for field_name, attribute in (("council_run_id", "engram.run.council_id"), ("parent_run_id", "engram.run.parent_id")):
        linked = run_fields.get(field_name)
        if isinstance(linked, str) and linked:
            root.put({attribute: linked})
    return trace


def for_agent(trace: t.Trace, agent: Agent) -> t.Trace:
    """The agent is known: the root names it, and its owner's choice of content capture holds."""
    trace.content = agent.trace_content
    root = root_of(trace)
    if root is not None:
        root.name = f"invoke_agent {agent.name}"
        root.put({t.AGENT_ID: agent.id, t.AGENT_NAME: agent.name, t.REQUEST_MODEL: agent.model})
    return trace


def root_of(trace: t.Trace) -> t.Span | None:
    return next((s for s in trace.spans if s.id == trace.root_id), None)


def start_sections_traced(sections: list[PromptSection], ctx: ToolContext, executor: Executor) -> dict[str, Future[Any]]:
    """The memory sections' reads (engine.prompt.start_sections), each a memory.read span with the
    rows it read."""
    trace = t.trace_of(ctx.state)

    def load(section: PromptSection) -> object:
        with trace.span(f"memory.read {section.name}", t.MEMORY_READ) as span:
            span.put({t.OPERATION: "retrieval", t.DATA_SOURCE: section.name, "engram.memory.section": section.name})
            rows = section.load(ctx)
            if isinstance(rows, (list, tuple, dict, set)):
                span.set(engram__memory__rows=len(rows))
            with suppress(Exception):  # the tokens of every row read, before the shared budget fits them
                span.set(engram__memory__tokens=estimate_tokens(section.render(rows, None) or ""))
            return rows

    return {s.name: executor.submit(load, s) for s in sections}


@dataclass
class ModelCall:
    """One chat span: the model call's request, then its answer (answered) or failure."""

    span: t.Span
    trace: t.Trace
    streaming: dict[str, Callable[[str], None]] = field(default_factory=dict)
    first_chunk: float | None = None

    def answered(self, response: ModelResponse, usage: Usage) -> None:
        span = self.span
        span.put(
            {
                t.RESPONSE_MODEL: response.model,
                t.FINISH_REASONS: [response.stop_reason] if response.stop_reason else None,
                t.INPUT_TOKENS: usage.input_tokens,
                t.OUTPUT_TOKENS: usage.output_tokens,
                t.CACHE_READ_TOKENS: usage.cache_read_tokens,
                t.CACHE_WRITE_TOKENS: usage.cache_write_tokens,
                "engram.usage.cost_usd": usage.cost_usd,
            }
        )
        if self.first_chunk is not None:
            span.put({t.TIME_TO_FIRST_CHUNK: round(self.first_chunk - span.start, 6)})
        if span.end is None:  # (ended when the call returned, when answered after the block)
            self.trace.end(span)


@contextmanager
def model_call(
    trace: t.Trace, *, model: str, provider: str, max_tokens: int, on_text: Callable[[str], None] | None = None
) -> Iterator[ModelCall]:
    """A chat span around provider.complete; `call.streaming` is what complete() gets (the
    watched turn's on_text, timed for the first chunk)."""
    span = trace.start(f"chat {model}", t.CHAT)
    span.put({t.OPERATION: "chat", t.PROVIDER: provider or None, t.REQUEST_MODEL: model, t.REQUEST_MAX_TOKENS: max_tokens})
    call = ModelCall(span, trace)
    if on_text is not None:
        span.set(**{t.REQUEST_STREAM: True})
        text_to = on_text

        def timed(text: str) -> None:
            if call.first_chunk is None:
                call.first_chunk = time.monotonic()
            text_to(text)

        call.streaming = {"on_text": timed}
    try:
        yield call
    except BaseException as err:
        trace.end(span, error=err)
        raise
    if span.end is None:
        trace.end(span)


def _tool_span(trace: t.Trace, use: Mapping[str, object], *, external: bool, at: float | None = None) -> t.Span:
    name = str(use.get("name", ""))
    span = trace.start(f"execute_tool {name}", t.TOOL, at=at)
    span.put({t.OPERATION: "execute_tool", t.TOOL_NAME: name, t.TOOL_CALL_ID: str(use.get("id", "")) or None})
    span.set(**{t.TOOL_TYPE: "extension" if external else "function"})
    if trace.content:
        span.put({t.TOOL_ARGUMENTS: _text(use.get("input"))})
    return span


def _tool_outcome(trace: t.Trace, span: t.Span, outcome: ToolOutcome) -> None:
    record = outcome.record
    span.put(
        {
            "engram.tool.connection": _str(record.get("connection")),
            "engram.tool.bytes": record.get("bytes") if isinstance(record.get("bytes"), int) else None,
            "engram.tool.duration_ms": record.get("durationMs") if isinstance(record.get("durationMs"), (int, float)) else None,
            "engram.tool.outcome": "error" if outcome.is_error else "ok",
            "engram.tool.truncated": bool(record["truncated"]) if record.get("truncated") else None,
        }
    )
    if trace.content:
        span.put({t.TOOL_RESULT: _text(outcome.content)})
    error = record.get("error")
    span.error = _str(error) if error else ("tool_error" if outcome.is_error else None)


def toolset_calls(
    ctx: ToolContext, uses: Sequence[Mapping[str, object]], call: Callable[[], list[ToolOutcome]]
) -> list[ToolOutcome]:
    """A toolset's calls (run together, in parallel): one execute_tool span each, siblings that
    overlap, from the batch's start for the call's own duration (the toolset measures each)."""
    trace = t.trace_of(ctx.state)
    began = time.monotonic()
    outcomes = call()
    done = time.monotonic()
    for use, outcome in zip(uses, outcomes, strict=True):
        span = _tool_span(trace, use, external=True, at=began)
        ms = outcome.record.get("durationMs")
        _tool_outcome(trace, span, outcome)
        trace.end(span, at=min(done, began + float(ms) / 1000) if isinstance(ms, (int, float)) else done)
    return outcomes


def registry_call(ctx: ToolContext, use: Mapping[str, object], call: Callable[[], ToolOutcome]) -> ToolOutcome:
    """One registry tool's call in its execute_tool span (a tool's memory writes nest under it)."""
    trace = t.trace_of(ctx.state)
    span = _tool_span(trace, use, external=False)
    TOOL_SPAN.put(ctx.state, span)
    try:
        outcome = call()
    except BaseException as err:
        trace.end(span, error=err)
        raise
    finally:
        ctx.state.pop(TOOL_SPAN, None)
    _tool_outcome(trace, span, outcome)
    trace.end(span)
    return outcome


@contextmanager
def memory_write_span(ctx: ToolContext, scope: str, operation: str) -> Iterator[t.Span]:
    """A tool's memory write (memory.write), under the tool's span."""
    trace = t.trace_of(ctx.state)
    with trace.span(f"memory.write {scope}", t.MEMORY_WRITE, parent=TOOL_SPAN.get(ctx.state)) as span:
        span.put({"engram.memory.scope": scope, "engram.memory.operation": operation})
        yield span


_STEPS = {
    "lease.wait": t.LEASE,
    "agent.read": t.LEASE,
    "transcript.get": t.TRANSCRIPT_GET,
    "transcript.put": t.TRANSCRIPT_PUT,
    "commit": t.COMMIT,
}


@contextmanager
def step(where: t.Trace | ToolContext, name: str) -> Iterator[t.Span]:
    """The lease wait (with the agent read beside it), the transcript GET and PUT, the commit."""
    with _trace(where).span(name, _STEPS[name]) as span:
        yield span


def _trace(where: t.Trace | ToolContext) -> t.Trace:
    return where if isinstance(where, t.Trace) else t.trace_of(where.state)


def stored(ctx: ToolContext, settings: Settings) -> dict[str, object]:
    return t.trace_of(ctx.state).stored(max_bytes=settings.trace_max_bytes)


def export(trace: t.Trace, settings: Settings) -> None:
    """OB2: the finished trace to OpenTelemetry, where the stack exports (off: nothing, not even
    the import). Best-effort: an exporter that fails never fails the turn."""
    if settings.tracing_export == "off":
        return
    try:
        from engram.kernel import otel

        otel.export(trace, settings)
    except Exception:
        logger.exception("the run's trace could not be exported", extra={"run_id": trace.run_id})


def _text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:4000]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class CommitDeps(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def runs(self) -> Runs: ...


@contextmanager
def committing(
    ctx: ToolContext, deps: CommitDeps, run: Run, items: Sequence[Mapping[str, object]], *, error: str | None = None
) -> Iterator[list[dict[str, object]]]:
    """The commit's span, and the items its transaction writes with the run's timeline among them
    (OB1: no round trip of its own); a failed run's root span carries its error's code."""
    trace = t.trace_of(ctx.state)
    root = root_of(trace)
    if error is not None and root is not None:
        root.error = error
    with trace.span("commit", t.COMMIT) as span:
        span.set(engram__run__status=run.status)
        yield [*map(dict, items), deps.runs.traces.item(ctx.tenant, run, stored(ctx, deps.settings))]


def finish(ctx: ToolContext, settings: Settings) -> None:
    """The turn is over: its root span ends, and the trace goes to OpenTelemetry when exported."""
    trace = t.trace_of(ctx.state)
    root = root_of(trace)
    if root is not None and root.end is None:
        trace.end(root)
    export(trace, settings)


def job_trace(run_id: str, job: str) -> tuple[t.Trace, t.Span]:
    """The trace of a job a turn caused (the summary fold, the extraction): its own part of the
    run's timeline, its root a `job` span under the turn's root (known from the run id)."""
    trace = t.Trace(run_id, root_id=os.urandom(8).hex(), source=job)
    root = trace.start(f"job {job}", t.JOB, parent=t.root_span_id(run_id), span_id=trace.root_id)
    root.put({"engram.job.kind": job, "engram.run.id": run_id})
    return trace, root


_JOB = ContextVar[t.Trace]("engram_job_trace", default=t.OFF)


@contextmanager
def job(kind: str, run_id: str, runs: Runs, tenant: str, settings: Settings) -> Iterator[t.Span]:
    """A job's part of its run's timeline: recorded while the block runs (its model calls through
    `job_trace_now`), then kept beside the run's (one GetItem and one PutItem, off the reply path)
    and exported when the stack exports. Not kept when the run is gone; never fails the job."""
    trace, root = job_trace(run_id, kind)
    token = _JOB.set(trace)
    try:
        yield root
    except BaseException as err:
        trace.end(root, error=err)
        raise
    finally:
        _JOB.reset(token)
        if root.end is None:
            trace.end(root)
        try:
            run = runs.get(tenant, run_id) if trace.keep else None
            if run is not None:
                runs.traces.put(tenant, run, trace.stored(max_bytes=settings.trace_max_bytes), kind)
        except Exception:
            logger.exception("a job's trace could not be kept", extra={"run_id": run_id, "job": kind})
        export(trace, settings)


def job_trace_now() -> t.Trace:
    """The trace of the job running in this thread (`job`), or one that records nothing."""
    return _JOB.get()
