"""A turn's events as they happen (ST2): the engine says what happened, a sink delivers it.

    turn.started    {runId, seq, agentId, sessionId, kind, trigger, message, messageChars, clientTurnId?}
    text.delta      {runId, seq, round, text}           the first piece at once, then coalesced: at
                                                        most one per 100 ms unless 300 chars gather
    tool.started    {runId, seq, toolUseId, name, input, inputTruncated?}
    tool.finished   {runId, seq, toolUseId, name, isError, durationMs?, error?}
    turn.completed  {runId, seq, sessionId, reply, replyTruncated?, toolCalls, usage}
    turn.failed     {runId, seq, error: {code, message, runId?}}
    approval.requested {runId, seq, pendingApprovals}   the turn paused for its owner (TL10): the
                                                        held calls; the socket's part of the turn ends
    approval.decided   {runId, seq, toolUseId, name, decision, decidedBy, note?}  each decision, when
                                                        the turn resumes; its events follow on the run
    turn.keepalive  {runId, seq}                        while the turn is quiet; seq: the last event's

Each has its pydantic model below (the one definition the server builds from, the docs' table and
the Python client's types are checked against: tests/unit/test_stream_events.py). No event is
over MAX_EVENT_BYTES (API Gateway refuses a message over 128 KB, ST6): the message is not echoed
in full in turn.started, a long text goes out as several deltas, a tool's input and results are
shortened to a preview with a reference to the run that keeps them whole (`GET /api/runs/{runId}`).

A turn without a sink (the sync HTTP turn, a run nobody watches) builds none of this: the loop
and the providers take their non-streaming path. A sink must never fail or slow the turn: it is
handed each event once and returns at once (the WebSocket sink posts from its own thread).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# A text.delta is sent when this much text or time has gathered since the last one.
COALESCE_CHARS = 300
COALESCE_SECONDS = 0.1
MAX_EVENT_BYTES = 128 * 1024  # API Gateway's limit on a message posted to a connection
MAX_DELTA_CHARS = 8_000  # one text.delta: under 48 KB even if every character is escaped
MESSAGE_PREVIEW_CHARS = 1_000  # what turn.started shows of the message
INPUT_PREVIEW_BYTES = 4_000  # a tool's input in tool.started, as JSON
RESULT_PREVIEW_CHARS = 500  # a tool's result in turn.completed


class StreamEvent(BaseModel):
    """What every event of a turn carries: its type, its run and its place in the run (1, 2, ...)."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid", defer_build=True)

    type: str
    run_id: str
    seq: int

    def wire(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class TurnStartedEvent(StreamEvent):
    type: Literal["turn.started"] = "turn.started"
    agent_id: str
    session_id: str
    kind: str
    trigger: str
    message: str  # at most MESSAGE_PREVIEW_CHARS of it
    message_chars: int
    client_turn_id: str | None = None


class TextDeltaEvent(StreamEvent):
    type: Literal["text.delta"] = "text.delta"
    round: int
    text: str


class ToolStartedEvent(StreamEvent):
    type: Literal["tool.started"] = "tool.started"
    tool_use_id: str
    name: str
    input: dict[str, object]
    input_truncated: bool | None = None  # the input was over INPUT_PREVIEW_BYTES: {} here, whole in the run


class ToolFinishedEvent(StreamEvent):
    type: Literal["tool.finished"] = "tool.finished"
    tool_use_id: str
    name: str
    is_error: bool
    connection: str | None = None
    duration_ms: float | None = None
    error: str | None = None
    truncated: int | None = None


class TurnCompletedEvent(StreamEvent):
    type: Literal["turn.completed"] = "turn.completed"
    session_id: str
    reply: str
    reply_truncated: bool | None = None  # the deltas (and the run) hold the whole reply
    tool_calls: list[dict[str, object]]
    tool_calls_omitted: int | None = None  # too many to show: GET /api/runs/{runId} has them
    usage: dict[str, object]


class TurnFailedEvent(StreamEvent):
    type: Literal["turn.failed"] = "turn.failed"
    error: dict[str, object]


class ApprovalRequestedEvent(StreamEvent):
    type: Literal["approval.requested"] = "approval.requested"
    pending_approvals: list[dict[str, object]]  # {toolUseId, name, input, requestedAt, expiresAt}


class ApprovalDecidedEvent(StreamEvent):
    type: Literal["approval.decided"] = "approval.decided"
    tool_use_id: str
    name: str
    decision: str  # approve | deny
    decided_by: str  # the owner's user id, or `expired`
    note: str | None = None


class KeepaliveEvent(StreamEvent):
    """Sent while a turn is quiet (a tool running), not kept; `seq` is the last event's, so a
    client also learns whether it has missed one."""

    type: Literal["turn.keepalive"] = "turn.keepalive"


TURN_EVENTS: tuple[type[StreamEvent], ...] = (
    TurnStartedEvent,
    TextDeltaEvent,
    ToolStartedEvent,
    ToolFinishedEvent,
    TurnCompletedEvent,
    TurnFailedEvent,
    ApprovalRequestedEvent,
    ApprovalDecidedEvent,
    KeepaliveEvent,
)


def size_of(event: Mapping[str, object]) -> int:
    """The bytes of an event as it is posted (UTF-8 JSON)."""
    return len(json.dumps(event, ensure_ascii=False, default=str).encode())


def text_pieces(text: str, most: int = MAX_DELTA_CHARS) -> list[str]:
    return [text[i : i + most] for i in range(0, len(text), most)] or [""]


def _tool_input(value: object) -> tuple[dict[str, object], bool | None]:
    data = value if isinstance(value, dict) else {}
    if size_of(data) <= INPUT_PREVIEW_BYTES:
        return data, None
    return {}, True


def _preview(value: object, most: int) -> tuple[object, bool]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return (value, False) if len(text) <= most else (text[:most], True)


def shortened_calls(run_id: str, calls: list[Mapping[str, object]], most: int) -> list[dict[str, object]]:
    """The tool calls of turn.completed: each result (and a large input) as a preview of `most`
    characters, with `resultChars` and `ref`: the run, whose record keeps the call (and its
    `/tool-results/{toolUseId}` the whole result)."""
    out: list[dict[str, object]] = []
    for call in calls:
        shown = dict(call)
        result, cut = _preview(call.get("result", ""), most)
        if cut:
            whole = call.get("result", "")
            shown.update(result=result, resultTruncated=True, resultChars=len(whole) if isinstance(whole, str) else None)
        tool_input, input_cut = _tool_input(call.get("input"))
        if input_cut:
            shown.update(input=tool_input, inputTruncated=True)
        if cut or input_cut:
            shown["ref"] = f"/api/runs/{run_id}"
        out.append({k: v for k, v in shown.items() if v is not None})
    return out


def completed_event(run_id: str, seq: int, public: Mapping[str, object]) -> TurnCompletedEvent:
    """turn.completed within MAX_EVENT_BYTES: tool results by reference with a preview (shorter
    while it does not fit), then, if it still does not fit, the reply cut (the deltas before it
    carry the whole reply, and so does the run)."""
    raw_calls = public.get("toolCalls")
    calls = [c for c in raw_calls if isinstance(c, Mapping)] if isinstance(raw_calls, list) else []
    reply = str(public.get("reply") or "")
    usage = public.get("usage")
    base: dict[str, object] = {
        "run_id": run_id,
        "seq": seq,
        "session_id": str(public.get("sessionId") or ""),
        "usage": usage if isinstance(usage, dict) else {},
    }
    limit = MAX_EVENT_BYTES - 1024
    most = RESULT_PREVIEW_CHARS
    while True:
        event = TurnCompletedEvent(**base, reply=reply, tool_calls=shortened_calls(run_id, calls, most))
        if size_of(event.wire()) <= limit:
            return event
        if most == 0:
            break
        most //= 4
    shown = shortened_calls(run_id, calls, 0)
    if size_of(TurnCompletedEvent(**base, reply="", tool_calls=shown).wire()) > limit:
        base["tool_calls_omitted"] = len(shown)  # so many calls that only the run shows them
        shown = []
    cut = reply
    while True:
        cut = cut[: len(cut) * 3 // 4]
        event = TurnCompletedEvent(**base, reply=cut, reply_truncated=True, tool_calls=shown)
        if size_of(event.wire()) <= limit:
            return event


class EventSink(Protocol):
    def emit(self, event: dict[str, object]) -> None:
        """Takes one event (a JSON-ready dict with `type`, `runId`, `seq`); must not raise or block."""

    def close(self) -> None:
        """The turn is over: deliver what is pending within a short bound, then let go."""


class TurnEvents:
    """One turn's events in order, numbered from 1, text coalesced before it reaches the sink."""

    def __init__(self, sink: EventSink, run_id: str, *, clock: Callable[[], float] = time.monotonic):
        self.sink = sink
        self.run_id = run_id
        self.seq = 0
        self.round = 0
        self.client_turn_id: str | None = None  # named in turn.started: the socket that sent the turn knows it
        self._clock = clock
        self._pending: list[str] = []
        self._pending_chars = 0
        self._sent_at = float("-inf")  # the first piece goes out at once: the time to first text is the model's

    def _next(self) -> tuple[str, int]:
        self.seq += 1
        return self.run_id, self.seq

    def _emit(self, event: StreamEvent) -> None:
        try:
            self.sink.emit(event.wire())
        except Exception:  # a sink's failure is its own: the turn goes on (logged by the sink)
            pass

    def started(self, *, agent_id: str, session_id: str, kind: str, trigger: str, message: str) -> None:
        run_id, seq = self._next()
        self._emit(
            TurnStartedEvent(
                run_id=run_id,
                seq=seq,
                agent_id=agent_id,
                session_id=session_id,
                kind=kind,
                trigger=trigger,
                message=message[:MESSAGE_PREVIEW_CHARS],
                message_chars=len(message),
                client_turn_id=self.client_turn_id,
            )
        )

    def text(self, delta: str) -> None:
        """A piece of the model's text as it arrives (the providers' on_text)."""
        if not delta:
            return
        self._pending.append(delta)
        self._pending_chars += len(delta)
        now = self._clock()
        if self._pending_chars >= COALESCE_CHARS or now - self._sent_at >= COALESCE_SECONDS:
            self._sent_at = now
            self.flush()

    def flush(self) -> None:
        if self._pending:
            text, self._pending, self._pending_chars = "".join(self._pending), [], 0
            for piece in text_pieces(text):
                run_id, seq = self._next()
                self._emit(TextDeltaEvent(run_id=run_id, seq=seq, round=self.round, text=piece))

    def next_round(self) -> None:
        self.flush()
        self.round += 1

    def tool_started(self, use: Mapping[str, object]) -> None:
        self.flush()
        tool_input, cut = _tool_input(use.get("input"))
        run_id, seq = self._next()
        self._emit(
            ToolStartedEvent(
                run_id=run_id, seq=seq, tool_use_id=str(use["id"]), name=str(use["name"]), input=tool_input, input_truncated=cut
            )
        )

    def tool_finished(self, call: Mapping[str, object]) -> None:
        run_id, seq = self._next()
        details = {k: call[k] for k in ("durationMs", "error", "connection", "truncated") if k in call}
        self._emit(
            ToolFinishedEvent.model_validate(
                {
                    **details,
                    "runId": run_id,
                    "seq": seq,
                    "toolUseId": call["toolUseId"],
                    "name": call["name"],
                    "isError": bool(call.get("isError")),
                }
            )
        )

    def completed(self, public: Mapping[str, object]) -> None:
        self.flush()
        run_id, seq = self._next()
        self._emit(completed_event(run_id, seq, public))
        self._close()

    def failed(self, error: Mapping[str, object]) -> None:
        self.flush()
        run_id, seq = self._next()
        self._emit(TurnFailedEvent(run_id=run_id, seq=seq, error=dict(error)))
        self._close()

    def approval_requested(self, pending: list[dict[str, object]]) -> None:
        """The turn paused for its owner's approval (TL10): the held calls (inputs shortened as in
        tool.started), and the sink is let go; the resumed turn's events continue the sequence."""
        self.flush()
        run_id, seq = self._next()
        shown = [{**p, "input": _tool_input(p.get("input"))[0]} for p in pending]
        self._emit(ApprovalRequestedEvent(run_id=run_id, seq=seq, pending_approvals=shown))
        self._close()

    def approval_decided(self, approval: Mapping[str, object]) -> None:
        run_id, seq = self._next()
        self._emit(
            ApprovalDecidedEvent(
                run_id=run_id,
                seq=seq,
                tool_use_id=str(approval["toolUseId"]),
                name=str(approval["name"]),
                decision=str(approval["decision"]),
                decided_by=str(approval.get("decidedBy") or ""),
                note=str(approval["note"]) if approval.get("note") else None,
            )
        )

    def _close(self) -> None:
        try:
            self.sink.close()
        except Exception:
            pass
