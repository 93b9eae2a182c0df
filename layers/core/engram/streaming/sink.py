"""A turn's events to the sockets watching its session (ST2, ST5), posted from a thread of their own.

The turn hands each event over (a queue put) and never waits for API Gateway: a slow, throttled
or vanished connection costs the turn nothing. Each event is posted at once to the sockets known
to watch the session (read when the sink starts, then after each event), then kept (DynamoDB, a
short TTL, at most MAX_KEPT per turn) for a socket that resumes, then the watchers are read again
and the event is posted to those that joined since. So the first delta waits for no AWS call but
its post, and a socket that subscribes or resumes mid-turn still misses nothing: one that
subscribed before that read gets the event from it, one that subscribed after it finds the event
kept when it reads the kept events (which it does after subscribing). An event may reach a socket
both ways; its seq tells (the clients drop a seq they have); but none up to the seq a socket
resumed the run after (its subscription says so): a client that had the event from the first
post, lost its socket and resumed on a new one before the second read has it already. A
connection that is gone (GoneException) is forgotten and skipped from then on; any other failure
skips that one message for that one socket. While nothing happens (a tool running) a keepalive
goes out every STREAM_KEEPALIVE_SECONDS, well inside API Gateway's 10-minute idle limit, to every
watcher. When the turn ends, what is pending is posted within CLOSE_WAIT_S, so the
Lambda worker does not freeze with the final event unsent."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from engram.engine.events import KeepaliveEvent, TurnEvents
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.settings import Settings
from engram.streaming.ports import Gone, Pusher, ResumePoint, Streams

CLOSE_WAIT_S = 2.0
MAX_KEPT = 2_000  # events kept per turn (a turn's events are a few dozen: coalesced deltas, tools)
KEPT_TTL_S = 3600  # how long a socket may come back and resume
_END = object()


class _Deps(Protocol):
    @property
    def streams(self) -> Streams: ...
    @property
    def pusher(self) -> Pusher: ...
    @property
    def settings(self) -> Settings: ...


class SocketSink:
    def __init__(
        self, pusher: Pusher, streams: Streams, tenant: str, agent_id: str, session_id: str, run_id: str, keepalive_s: float
    ):
        self.pusher, self.streams = pusher, streams
        self.tenant, self.agent_id, self.session_id, self.run_id = tenant, agent_id, session_id, run_id
        self.keepalive_s = keepalive_s
        self.gone: set[str] = set()
        self.pushes = 0
        self.last_seq = 0
        self._watching: dict[str, ResumePoint | None] | None = None  # the session's watchers as last read
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, name="engram-stream", daemon=True)
        self._thread.start()

    def emit(self, event: Mapping[str, object]) -> None:
        self._queue.put(event)

    def close(self) -> None:
        self._queue.put(_END)
        self._thread.join(CLOSE_WAIT_S)
        metrics.add_metric(name="StreamPushes", unit=MetricUnit.Count, value=self.pushes)

    def _send_all(self) -> None:
        self._watching = self._watchers()  # before the first event, while the turn starts
        while True:
            try:
                event = self._queue.get(timeout=self.keepalive_s)
            except queue.Empty:
                self._post(KeepaliveEvent(run_id=self.run_id, seq=self.last_seq).wire(), keep=False)
                continue
            if event is _END:
                return
            self._post(event, keep=True)

    def _post(self, event: Mapping[str, object], *, keep: bool) -> None:
        data = json.dumps(event, ensure_ascii=False, default=str).encode()
        # A kept event is not posted to a socket that resumed after it; a keepalive (its seq the last
        # event's) is posted to every watcher, or a socket resumed during a long tool would idle out.
        seq = event.get("seq") if keep else None
        posted = set(self._send_to(self._watching or {}, seq, data))
        if isinstance(seq, int):
            self.last_seq = seq
            if seq <= MAX_KEPT:
                try:
                    self.streams.keep_event(self.tenant, self.run_id, seq, data.decode(), KEPT_TTL_S)
                except Exception as err:  # a socket that resumes misses it; the live ones do not
                    logger.warning("could not keep a stream event", extra={"run_id": self.run_id, "error": repr(err)})
        # Read after the keep: a socket subscribed since the last read is posted the event now; one
        # that subscribes after this read reads the kept event itself.
        watching = self._watchers()
        if watching is not None:
            self._watching = watching
            self._send_to({c: r for c, r in watching.items() if c not in posted}, seq, data)

    def _watchers(self) -> dict[str, ResumePoint | None] | None:
        try:
            return self.streams.watching(self.tenant, self.agent_id, self.session_id)
        except Exception as err:
            logger.warning("could not read a session's watchers", extra={"run_id": self.run_id, "error": repr(err)})
            return None

    def _send_to(self, connections: Mapping[str, ResumePoint | None], seq: object, data: bytes) -> list[str]:
        """Posts `data` (event `seq` of this run) to each of `connections` not known to be gone
        and not resumed after it (a socket that resumed this run after seq N has 1..N: it had them
        before it came back); the ones it was sent to."""
        sent = []
        for connection_id, resumed in connections.items():
            if connection_id in self.gone:
                continue
            if resumed is not None and isinstance(seq, int) and resumed[0] == self.run_id and seq <= resumed[1]:
                continue
            self._send(connection_id, data)
            sent.append(connection_id)
        return sent

    def _send(self, connection_id: str, data: bytes) -> None:
        try:
            self.pusher.post(connection_id, data)
            self.pushes += 1
        except Gone:
            self.gone.add(connection_id)
            try:
                self.streams.close(connection_id)
            except Exception:
                logger.warning("could not forget a gone connection", extra={"connection_id": connection_id})
        except Exception as err:  # throttled, unreachable: this message is lost to this socket only
            logger.warning("a stream message was not delivered", extra={"connection_id": connection_id, "error": repr(err)})


def watchers(deps: _Deps, tenant: str, agent_id: str, session_id: str, run_id: str) -> TurnEvents | None:
    """The events of a turn on a session: kept for a socket that resumes, posted to the sockets
    watching the session as each event goes out (whoever watches then, ST5)."""
    keepalive = deps.settings.stream_keepalive_s
    return TurnEvents(SocketSink(deps.pusher, deps.streams, tenant, agent_id, session_id, run_id, keepalive), run_id)
