"""Live turns over the WebSocket API (docs/streaming.md): a one-time ticket opens a socket; `turn`
sends a message and yields the turn's events as they arrive; `subscribe` follows every turn of a
session (queued turns, webhooks, heartbeats). websockets is imported when a socket is opened."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from .errors import StreamError, error_for
from .models import StreamTicket, ToolCall, Usage

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

TURN_IDLE_TIMEOUT = 330.0  # a socket turn's budget is 300 s on the server (TurnBudgetSeconds)


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
    | TurnKeepalive
    | Resumed
)
TERMINAL = ("turn.completed", "turn.failed")


def _refused(frame: dict[str, Any]) -> StreamError:
    error = frame.get("error") or {}
    return StreamError(
        str(error.get("message", "the stream refused the frame")), code=str(error.get("code", "error")), field=error.get("field")
    )


class Stream:
    """One open socket. Frames that arrive while `turn` or `subscribe` waits for something else are
    kept, in order, for `events()`."""

    def __init__(self, ws: ClientConnection, *, timeout: float = 60.0) -> None:
        self._ws = ws
        self._backlog: deque[dict[str, Any]] = deque()
        self.timeout = timeout

    @classmethod
    def open(cls, ticket: StreamTicket, *, open_timeout: float = 10.0, timeout: float = 60.0) -> Stream:
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
        return cls(ws, timeout=timeout)

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
        turn.failed. A clientTurnId sent before names the same run: when that run has finished,
        turn.queued (with its status) is all that comes. A refused frame raises StreamError
        (validation_error, not_found, quota_exceeded)."""
        self.send(
            {"action": "turn", "agentId": agent_id, "sessionId": session_id, "message": message, "clientTurnId": client_turn_id}
        )
        run_id: str | None = None
        early: list[dict[str, Any]] = []  # the turn's events may overtake its turn.queued
        while True:
            frame = self._read(idle_timeout)
            kind = frame.get("type")
            if kind == "error" and frame.get("clientTurnId") in (client_turn_id, None):
                raise _refused(frame)
            if kind == "turn.queued" and frame.get("clientTurnId") == client_turn_id:
                run_id = str(frame["runId"])
                yield cast(StreamEvent, frame)
                if frame.get("status") in ("succeeded", "failed"):  # this clientTurnId ran already: no event follows
                    self._backlog.extend(early)
                    return
                for ahead in early:
                    if ahead.get("runId") == run_id:
                        yield cast(StreamEvent, ahead)
                        if ahead.get("type") in TERMINAL:
                            return
                    else:
                        self._backlog.append(ahead)
                early.clear()
            elif run_id is None and "runId" in frame:
                early.append(frame)
            elif run_id is not None and frame.get("runId") == run_id:
                yield cast(StreamEvent, frame)
                if kind in TERMINAL:
                    return
            else:
                self._backlog.append(frame)

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
    "TurnQueued",
    "TurnStarted",
]
