"""A turn's events as they happen (ST2): the engine says what happened, a sink delivers it.

    turn.started    {runId, seq, agentId, sessionId, kind, trigger, message, clientTurnId?}
    text.delta      {runId, seq, round, text}           the first piece at once, then coalesced: at
                                                        most one per 100 ms unless 300 chars gather
    tool.started    {runId, seq, toolUseId, name, input}
    tool.finished   {runId, seq, toolUseId, name, isError, durationMs?, error?}
    turn.completed  {runId, seq, sessionId, reply, toolCalls, usage}
    turn.failed     {runId, seq, error: {code, message, runId?}}

A turn without a sink (the sync HTTP turn, a run nobody watches) builds none of this: the loop
and the providers take their non-streaming path. A sink must never fail or slow the turn: it is
handed each event once and returns at once (the WebSocket sink posts from its own thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

# A text.delta is sent when this much text or time has gathered since the last one.
COALESCE_CHARS = 300
COALESCE_SECONDS = 0.1


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
        self.started_with: dict[str, Any] = {}  # what the caller adds to turn.started (a socket's clientTurnId)
        self._clock = clock
        self._pending: list[str] = []
        self._pending_chars = 0
        self._sent_at = float("-inf")  # the first piece goes out at once: the time to first text is the model's

    def _emit(self, event_type: str, /, **data: object) -> None:
        self.seq += 1
        try:
            self.sink.emit({**data, "type": event_type, "runId": self.run_id, "seq": self.seq})
        except Exception:  # a sink's failure is its own: the turn goes on (logged by the sink)
            pass

    def started(self, **data: object) -> None:
        self._emit("turn.started", **data, **self.started_with)

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
            self._emit("text.delta", round=self.round, text=text)

    def next_round(self) -> None:
        self.flush()
        self.round += 1

    def tool_started(self, use: Mapping[str, object]) -> None:
        self.flush()
        self._emit("tool.started", toolUseId=use["id"], name=use["name"], input=use.get("input") or {})

    def tool_finished(self, call: Mapping[str, object]) -> None:
        details = {k: call[k] for k in ("durationMs", "error", "connection", "truncated") if k in call}
        self._emit("tool.finished", toolUseId=call["toolUseId"], name=call["name"], isError=bool(call.get("isError")), **details)

    def completed(self, public: Mapping[str, object]) -> None:
        self.flush()
        self._emit("turn.completed", **public)
        self._close()

    def failed(self, error: Mapping[str, object]) -> None:
        self.flush()
        self._emit("turn.failed", error=error)
        self._close()

    def _close(self) -> None:
        try:
            self.sink.close()
        except Exception:
            pass
