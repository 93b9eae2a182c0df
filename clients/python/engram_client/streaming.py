"""Live turns over the WebSocket API (docs/streaming.md): a one-time ticket opens a socket; `turn`
sends a message and yields the turn's events as they arrive; `subscribe` follows every turn of a
session (queued turns, webhooks, heartbeats). websockets is imported when a socket is opened."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from .errors import StreamError, error_for
from .models import StreamTicket, ToolCall, Usage

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

TURN_IDLE_TIMEOUT = 330.0  # a socket turn's budget is 300 s on the server (TurnBudgetSeconds)
RECONNECT_TRIES = 6  # a dropped socket is opened again this many times, with backoff (0.5 s, doubling)


class TurnQueued(TypedDict):
    type: Literal["turn.queued"]
    clientTurnId: str
    runId: str
    agentId: str
    sessionId: str
    status: str


class Subscribed(TypedDict):
    type: Literal["subscribed", "unsubscribed"]
    agentId: str
    sessionId: str


class TurnStarted(TypedDict):
    type: Literal["turn.started"]
    runId: str
    seq: int
    agentId: str
    sessionId: str
    kind: str
    trigger: str
    message: str  # its first 1,000 characters
    messageChars: int
    clientTurnId: NotRequired[str]


class TextDelta(TypedDict):
    type: Literal["text.delta"]
    runId: str
    seq: int
    round: int
    text: str


class ToolStarted(TypedDict):
    type: Literal["tool.started"]
    runId: str
    seq: int
    toolUseId: str
    name: str
    input: dict[str, Any]
    inputTruncated: NotRequired[bool]  # the input was too large: {} here, whole in the run


class ToolFinished(TypedDict):
    type: Literal["tool.finished"]
    runId: str
    seq: int
    toolUseId: str
    name: str
    isError: bool
    connection: NotRequired[str]
    durationMs: NotRequired[float]
    error: NotRequired[str]
    truncated: NotRequired[int]


class TurnCompleted(TypedDict):
    type: Literal["turn.completed"]
    runId: str
    seq: int
    sessionId: str
    reply: str
    replyTruncated: NotRequired[bool]  # the deltas (and the run) hold the whole reply
    toolCalls: list[ToolCall]  # results over 500 characters as a preview, with `ref` to the run
    toolCallsOmitted: NotRequired[int]
    usage: Usage


class TurnFailed(TypedDict):
    type: Literal["turn.failed"]
    runId: str
    seq: int
    error: dict[str, Any]


class ApprovalRequested(TypedDict):
    type: Literal["approval.requested"]
    runId: str
    seq: int
    pendingApprovals: list[dict[str, Any]]  # {toolUseId, name, input, requestedAt, expiresAt}


class ApprovalDecided(TypedDict):
    type: Literal["approval.decided"]
    runId: str
    seq: int
    toolUseId: str
    name: str
    decision: str  # approve | deny
    decidedBy: str  # the owner's user id, or `expired`
    note: NotRequired[str]


class TurnKeepalive(TypedDict):
    type: Literal["turn.keepalive"]
    runId: str
    seq: int  # the last event's


class Resumed(TypedDict):
    type: Literal["resumed"]
    runId: str
    agentId: str
    sessionId: str
    afterSeq: int
    replayed: int
    status: str


StreamEvent = (
    TurnQueued
    | Subscribed
    | TurnStarted
    | TextDelta
    | ToolStarted
    | ToolFinished
    | TurnCompleted
    | TurnFailed
    | ApprovalRequested
    | ApprovalDecided
    | TurnKeepalive
    | Resumed
)
TERMINAL = ("turn.completed", "turn.failed")
# The turn paused for your approval of a tool call (TL10): its socket part ends here; decide, then
# `Stream.follow(runId, after_seq=...)` to see the resumed turn's events.
PAUSED = "approval.requested"


def _refused(frame: dict[str, Any]) -> StreamError:
    error = frame.get("error") or {}
    return StreamError(
        str(error.get("message", "the stream refused the frame")), code=str(error.get("code", "error")), field=error.get("field")
    )


class _Turn:
    """What `Stream.turn` has seen of its turn: its run, the last seq yielded, the frames that came
    before its turn.queued."""

    def __init__(self, client_turn_id: str) -> None:
        self.client_turn_id = client_turn_id
        self.run_id: str | None = None
        self.last = 0
        self.done = False
        self.early: list[dict[str, Any]] = []

    def take(self, got: dict[str, Any], stream: Stream) -> list[dict[str, Any]]:
        """The frames to yield now, in order (others go back to the stream's backlog)."""
        if got.get("type") == "turn.queued" and got.get("clientTurnId") == self.client_turn_id:
            if self.run_id is not None:
                return []  # the same turn, sent again after a reconnect
            self.run_id = str(got["runId"])
            if got.get("status") in ("succeeded", "failed"):  # this clientTurnId ran already: no event follows
                stream._backlog.extend(self.early)
                self.done = True
                return [got]
            out = [got]
            pending, self.early = self.early, []
            for ahead in pending:
                out += self.take(ahead, stream)
            return out
        if self.run_id is None and "runId" in got:
            self.early.append(got)
            return []
        if self.run_id is None or got.get("runId") != self.run_id:
            stream._backlog.append(got)
            return []
        return self._of_run(got, stream)

    def _of_run(self, got: dict[str, Any], stream: Stream) -> list[dict[str, Any]]:
        kind, seq = got.get("type"), got.get("seq")
        if kind == "resumed":
            if got.get("status") in ("succeeded", "failed") and not got.get("replayed") and self.last == 0:
                raise StreamError(f"the run ended and its events are gone: GET /api/runs/{self.run_id}", code="expired")
            return []
        if self.done or kind == "turn.keepalive" or not isinstance(seq, int) or seq <= self.last:
            return []  # a keepalive, or an event already yielded (replayed and live)
        if seq > self.last + 1:  # one went missing on the way: ask for it again
            stream.send({"action": "resume", "runId": self.run_id, "afterSeq": self.last})
            return []
        self.last = seq
        self.done = kind in TERMINAL or kind == PAUSED
        return [got]


class Stream:
    """One open socket. Frames that arrive while `turn` or `subscribe` waits for something else are
    kept, in order, for `events()`."""

    def __init__(
        self,
        ws: ClientConnection,
        *,
        timeout: float = 60.0,
        tickets: Callable[[], StreamTicket] | None = None,
        open_timeout: float = 10.0,
        reconnect_tries: int = RECONNECT_TRIES,
    ) -> None:
        self._ws = ws
        self._backlog: deque[dict[str, Any]] = deque()
        self.timeout = timeout
        self._tickets = tickets  # a new ticket for a new socket when this one drops (None: no reconnect)
        self._open_timeout = open_timeout
        self.reconnect_tries = reconnect_tries
        self.reconnects = 0

    @classmethod
    def open(
        cls,
        ticket: StreamTicket,
        *,
        open_timeout: float = 10.0,
        timeout: float = 60.0,
        tickets: Callable[[], StreamTicket] | None = None,
    ) -> Stream:
        return cls(cls._connect(ticket, open_timeout), timeout=timeout, tickets=tickets, open_timeout=open_timeout)

    def reconnect(self) -> None:
        """A new socket (a new ticket) in place of one that dropped, with backoff; StreamError
        (connection_closed) when it cannot be opened within `reconnect_tries`."""
        if self._tickets is None:
            raise StreamError("the stream closed", code="connection_closed")
        pause = 0.5
        last: StreamError | None = None
        for _ in range(self.reconnect_tries):
            try:
                self._ws = self._connect(self._tickets(), self._open_timeout)
                self.reconnects += 1
                return
            except StreamError as err:
                last = err
                time.sleep(pause)
                pause = min(pause * 2, 8.0)
        raise StreamError(f"the stream closed and could not be opened again: {last}", code="connection_closed")

    @staticmethod
    def _connect(ticket: StreamTicket, open_timeout: float) -> ClientConnection:
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        try:
            # Entered at once: Stream is the context manager that closes it (websockets 17 warns otherwise).
            ws = connect(f"{ticket['url']}/?ticket={ticket['ticket']}", open_timeout=open_timeout, max_size=2**22).__enter__()
        except InvalidStatus as err:  # the handshake's status: 401 ticket_refused, 409 quota_exceeded
            status = err.response.status_code
            try:
                body = json.loads(err.response.body or b"null")
            except ValueError:
                body = None
            raise error_for(status, body) from err
        except (OSError, TimeoutError, WebSocketException) as err:
            raise StreamError(f"cannot open the stream at {ticket['url']}: {err}", code="connect_error") from err
        return ws

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frame: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            self._ws.send(json.dumps(frame))
        except ConnectionClosed as err:
            raise StreamError("the stream closed", code="connection_closed") from err

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next frame (a kept one first); TimeoutError when none comes within `timeout` seconds."""
        if self._backlog:
            return self._backlog.popleft()
        return self._read(self.timeout if timeout is None else timeout)

    def _read(self, timeout: float) -> dict[str, Any]:
        """The next frame off the socket (turn and subscribe keep what they skip for recv)."""
        from websockets.exceptions import ConnectionClosed

        try:
            raw = self._ws.recv(timeout=timeout)
        except ConnectionClosed as err:
            raise StreamError("the stream closed", code="connection_closed") from err
        frame = json.loads(raw)
        if not isinstance(frame, dict):
            raise StreamError("the stream sent a frame that is not an object", code="bad_frame")
        return frame

    def turn(
        self, agent_id: str, session_id: str, message: str, *, client_turn_id: str, idle_timeout: float = TURN_IDLE_TIMEOUT
    ) -> Iterator[StreamEvent]:
        """Send a turn; yield turn.queued, then the turn's own events up to turn.completed or
        turn.failed, each once and in order. A clientTurnId sent before names the same run: when
        that run has finished, turn.queued (with its status) is all that comes. When the socket
        drops, a new one is opened (with backoff) and the turn resumed after the last event seen
        (or, before turn.queued came, sent again: its clientTurnId makes it the same run). A
        refused frame raises StreamError (validation_error, not_found, too_many_turns)."""
        frame = {
            "action": "turn",
            "agentId": agent_id,
            "sessionId": session_id,
            "message": message,
            "clientTurnId": client_turn_id,
        }
        self.send(frame)
        return self._events_of(_Turn(client_turn_id), frame, idle_timeout)

    def follow(self, run_id: str, *, after_seq: int = 0, idle_timeout: float = TURN_IDLE_TIMEOUT) -> Iterator[StreamEvent]:
        """A run's events after `after_seq` (kept ones replayed, then live), each once and in order,
        up to turn.completed, turn.failed or approval.requested: e.g. a turn resumed after your
        approval (TL10), from the approval.requested's seq."""
        turn = _Turn("")
        turn.run_id, turn.last = run_id, after_seq
        frame = {"action": "resume", "runId": run_id, "afterSeq": after_seq}
        self.send(frame)
        return self._events_of(turn, frame, idle_timeout)

    def _events_of(self, turn: _Turn, frame: dict[str, Any], idle_timeout: float) -> Iterator[StreamEvent]:
        while True:
            try:
                got = self._read(idle_timeout)
            except StreamError as err:
                if err.code != "connection_closed" or self._tickets is None:
                    raise
                self.reconnect()
                self.send({"action": "resume", "runId": turn.run_id, "afterSeq": turn.last} if turn.run_id else frame)
                continue
            if got.get("type") == "error" and got.get("clientTurnId") in (turn.client_turn_id or None, None):
                raise _refused(got)
            for event in turn.take(got, self):
                yield cast(StreamEvent, event)
            if turn.done:
                return

    def subscribe(self, agent_id: str, session_id: str) -> None:
        """From now on every turn of the session arrives on this socket (read them with events())."""
        self._ack({"action": "subscribe", "agentId": agent_id, "sessionId": session_id}, "subscribed")

    def unsubscribe(self, agent_id: str, session_id: str) -> None:
        self._ack({"action": "unsubscribe", "agentId": agent_id, "sessionId": session_id}, "unsubscribed")

    def _ack(self, frame: dict[str, Any], expected: str) -> None:
        self.send(frame)
        while True:
            got = self._read(self.timeout)
            if got.get("type") == "error" and not got.get("clientTurnId"):
                raise _refused(got)
            if got.get("type") == expected and got.get("sessionId") == frame["sessionId"]:
                return
            self._backlog.append(got)

    def events(self, *, idle_timeout: float | None = None) -> Iterator[StreamEvent]:
        """Every frame as it arrives (kept ones first), until the socket closes or stays quiet for
        `idle_timeout` seconds (None: the client's timeout)."""
        while True:
            try:
                frame = self.recv(idle_timeout)
            except TimeoutError:
                return
            except StreamError as err:
                if err.code == "connection_closed":
                    return
                raise
            yield cast(StreamEvent, frame)


__all__ = [
    "Stream",
    "StreamEvent",
    "Subscribed",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "TurnCompleted",
    "TurnFailed",
    "TurnKeepalive",
    "Resumed",
    "TurnQueued",
    "TurnStarted",
    "ApprovalRequested",
    "ApprovalDecided",
    "PAUSED",
]
