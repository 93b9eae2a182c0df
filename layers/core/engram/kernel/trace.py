"""A run's timeline (OB1): spans recorded while a turn (or a job it caused) runs, kept with the run.

Cheap on purpose: plain objects, the monotonic clock, no OpenTelemetry import (engram.kernel.otel
replays a finished trace into the OpenTelemetry SDK only when the stack exports traces, OB2). The
recorder rides in the turn's state (`TRACE`), so the engine, the memory sections and the tools
record into it without another parameter; a turn without one records nothing.

Attribute names are the OpenTelemetry GenAI semantic conventions' (`gen_ai.*`, as the
opentelemetry-semantic-conventions package spells them); Engram's own are `engram.*`. No message
text, tool input or result, nor secret goes in a span unless the trace captures content
(`Trace.content`, the agent owner's choice); ids, names, counts, sizes and times only.

The stored form (`Trace.stored`, what GET /api/runs/{runId}/trace returns under `spans`) is drawn
as nested bars: every span has its offset and end from the trace's start in milliseconds, its
parent's id and its depth, in start order.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engram.kernel.state import StateKey, TurnState

type AttrValue = str | int | float | bool | list[str]

# --- the conventions' names (opentelemetry-semantic-conventions, gen_ai_attributes) -----------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"  # content: only when the trace captures it
TOOL_RESULT = "gen_ai.tool.call.result"  # content: only when the trace captures it
DATA_SOURCE = "gen_ai.data_source.id"
ERROR_TYPE = "error.type"

# What a span is, for the timeline's drawing (its `kind`); the OpenTelemetry span kind follows it.
AGENT, CHAT, TOOL, MEMORY_READ, MEMORY_WRITE = "agent", "chat", "tool", "memory.read", "memory.write"
LEASE, TRANSCRIPT_GET, TRANSCRIPT_PUT, COMMIT, JOB = "lease", "transcript.get", "transcript.put", "commit", "job"
CLIENT_KINDS = frozenset({CHAT, TOOL, LEASE, TRANSCRIPT_GET, TRANSCRIPT_PUT, COMMIT})

# The stored trace is one DynamoDB item beside the run (written in its commit): at most this many
# bytes of spans; the rest are dropped, newest first, and the trace says so.
MAX_STORED_BYTES = 48_000
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def _hex(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def root_span_id(run_id: str) -> str:
    """The run's root span id, known from the run id alone: a job the turn caused records its own
    spans under it (and OpenTelemetry joins them) without reading the turn's trace."""
    return _hex(f"{run_id}:root", 16)


def trace_id(run_id: str) -> str:
    """The run's trace id (32 hex): its first 8 are the run's creation time in epoch seconds, as
    X-Ray requires of the ids it takes through ADOT; the rest a digest of the run id."""
    return f"{_run_epoch(run_id):08x}{_hex(run_id, 24)}"


def _run_epoch(run_id: str) -> int:
    """The creation second a time-ordered run id (kernel.ids.new_id) carries; now for any other."""
    stamp = run_id.partition("_")[2][:10]
    try:
        ms = 0
        for char in stamp:
            ms = ms * 32 + _CROCKFORD.index(char)
    except ValueError:
        return int(time.time())
    return ms // 1000 if len(stamp) == 10 else int(time.time())


@dataclass(slots=True)
class Span:
    id: str
    parent_id: str | None
    name: str
    kind: str
    start: float  # time.monotonic()
    end: float | None = None
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    error: str | None = None  # the error's type (error.type): the span failed

    def set(self, **attributes: AttrValue | None) -> None:
        """Attributes by keyword (dots written as `__`: gen_ai__tool__name), None left out."""
        for key, value in attributes.items():
            if value is not None:
                self.attributes[key.replace("__", ".")] = value

    def put(self, values: Mapping[str, AttrValue | None]) -> None:
        for key, value in values.items():
            if value is not None:
                self.attributes[key] = value


class Trace:
    """The spans of one run (or of one job under a run). Thread-safe: the memory sections and
    parallel tool calls record from the turn's pool."""

    def __init__(self, run_id: str, *, content: bool = False, root_id: str | None = None, source: str = "turn") -> None:
        self.run_id = run_id
        self.content = content  # message text and tool input/results may be kept (the owner said so)
        self.source = source
        self.trace_id = trace_id(run_id)
        self.wall_start = time.time()
        self.mono_start = time.monotonic()
        self.spans: list[Span] = []
        self.root_id = root_id or root_span_id(run_id)
        self.keep = True  # a job that turns out to be a redelivery of a done one keeps nothing
        self._lock = threading.Lock()

    # --- recording -----------------------------------------------------------------------------
    def start(
        self, name: str, kind: str, *, parent: Span | str | None = None, span_id: str | None = None, at: float | None = None
    ) -> Span:
        """A span from now (or `at`, a time.monotonic()); under the root unless `parent` says."""
        parent_id = parent.id if isinstance(parent, Span) else parent
        if parent_id is None and span_id != self.root_id:
            parent_id = self.root_id
        span = Span(span_id or os.urandom(8).hex(), parent_id, name, kind, time.monotonic() if at is None else at)
        with self._lock:
            self.spans.append(span)
        return span

    @staticmethod
    def end(span: Span, *, at: float | None = None, error: BaseException | str | None = None) -> None:
        span.end = time.monotonic() if at is None else at
        if error is not None:
            span.error = error if isinstance(error, str) else type(error).__name__

    @contextmanager
    def span(self, name: str, kind: str, *, parent: Span | str | None = None) -> Iterator[Span]:
        """A span around a block; an exception marks it failed (error.type) and goes on."""
        span = self.start(name, kind, parent=parent)
        try:
            yield span
        except BaseException as err:
            self.end(span, error=err)
            raise
        self.end(span)

    # --- the stored form -----------------------------------------------------------------------
    def _ms(self, at: float) -> float:
        return round((at - self.mono_start) * 1000, 3)

    def stored(self, *, max_bytes: int = MAX_STORED_BYTES) -> dict[str, object]:
        """The trace as it is kept and served: spans in start order, each with its offset from the
        trace's start (ms), its parent and depth. A span still open (the root and the commit
        while the commit writes this) ends now and says `open`. Past `max_bytes` of spans the
        latest are dropped (never a kept span's parent) and `truncated` counts them."""
        now = time.monotonic()
        with self._lock:
            spans = sorted(self.spans, key=lambda s: (s.start, s.id != self.root_id))
        ids = {s.id for s in spans}
        depth: dict[str, int] = {}
        out: list[dict[str, object]] = []
        size, dropped = 0, 0
        for span in spans:
            if span.parent_id in ids and span.parent_id not in depth:  # its parent was dropped: so is it
                dropped += 1
                continue
            level = depth[span.parent_id] + 1 if span.parent_id in depth else 0
            record = self._record(span, level, now)
            cost = len(json.dumps(record, separators=(",", ":"), default=str)) + 1
            if out and size + cost > max_bytes:
                dropped += 1
                continue
            size += cost
            depth[span.id] = level
            out.append(record)
        return {
            "runId": self.run_id,
            "traceId": self.trace_id,
            "source": self.source,
            "startedAt": datetime.fromtimestamp(self.wall_start, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "durationMs": self._ms(now),
            "contentCaptured": self.content,
            "truncated": dropped > 0,
            "droppedSpans": dropped,
            "spans": out,
        }

    def _record(self, span: Span, level: int, now: float) -> dict[str, object]:
        end = span.end if span.end is not None else now
        record: dict[str, object] = {
            "id": span.id,
            "parentId": span.parent_id,
            "depth": level,
            "name": span.name,
            "kind": span.kind,
            "startMs": self._ms(span.start),
            "endMs": self._ms(end),
            "durationMs": round((end - span.start) * 1000, 3),
            "status": "error" if span.error else "ok",
            "attributes": dict(span.attributes),
        }
        if span.error:
            record["attributes"] = {**span.attributes, ERROR_TYPE: span.error}
        if span.end is None:
            record["open"] = True
        return record


# The turn's recorder in ToolContext.state; absent: nothing is recorded.
TRACE = StateKey[Trace]("trace")


class _Off(Trace):
    """Records nothing (a context without a trace: some tests, tools run outside a turn)."""

    def start(
        self, name: str, kind: str, *, parent: Span | str | None = None, span_id: str | None = None, at: float | None = None
    ) -> Span:
        return Span("0" * 16, None, name, kind, 0.0)


OFF = _Off("off")


def trace_of(state: TurnState) -> Trace:
    return TRACE.get(state) or OFF


def merge(parts: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """A run's stored traces as one timeline: the turn's, and the jobs' it caused (each recorded
    by its own job, later), their spans placed on the turn's time axis by their wall clocks."""
    if not parts:
        return {}
    ordered = sorted(parts, key=lambda p: (p.get("source") != "turn", str(p.get("startedAt", ""))))
    first = ordered[0]
    base = _epoch_ms(first.get("startedAt"))
    spans: list[dict[str, object]] = []
    depth: dict[str, int] = {}
    end = _number(first.get("durationMs"))
    for part in ordered:
        shift = _epoch_ms(part.get("startedAt")) - base
        raw_spans = part.get("spans")
        for raw in raw_spans if isinstance(raw_spans, list) else []:
            span = dict(raw)
            span["startMs"] = round(_number(span.get("startMs")) + shift, 3)
            span["endMs"] = round(_number(span.get("endMs")) + shift, 3)
            parent = str(span.get("parentId"))
            span["depth"] = depth[parent] + 1 if parent in depth else int(_number(span.get("depth")))
            depth[str(span["id"])] = int(_number(span["depth"]))
            if part is not first:
                span["job"] = part.get("source")
            end = max(end, _number(span["endMs"]))
            spans.append(span)
    spans.sort(key=lambda s: _number(s.get("startMs")))
    return {
        "runId": first.get("runId"),
        "traceId": first.get("traceId"),
        "startedAt": first.get("startedAt"),
        "durationMs": round(end, 3),
        "contentCaptured": any(bool(p.get("contentCaptured")) for p in ordered),
        "truncated": any(bool(p.get("truncated")) for p in ordered),
        "droppedSpans": sum(int(_number(p.get("droppedSpans"))) for p in ordered),
        "parts": [p.get("source") for p in ordered],
        "spans": spans,
    }


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _epoch_ms(stamp: object) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return 0.0
