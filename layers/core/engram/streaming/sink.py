"""A turn's events to the sockets watching its session (ST2), posted from a thread of their own.

The turn hands each event over (a queue put) and never waits for API Gateway: a slow, throttled
or vanished connection costs the turn nothing. A connection that is gone (GoneException) is
forgotten and skipped from then on; any other failure skips that one message for that one socket.
When the turn ends, what is pending is posted within CLOSE_WAIT_S, so the Lambda worker does not
freeze with the final event unsent."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from engram.engine.events import TurnEvents
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.streaming.ports import Gone, Pusher, Streams

CLOSE_WAIT_S = 2.0
_END = object()


class _Deps(Protocol):
    @property
    def streams(self) -> Streams: ...
    @property
    def pusher(self) -> Pusher: ...


class SocketSink:
    def __init__(self, pusher: Pusher, connections: list[str], streams: Streams):
        self.pusher = pusher
        self.live = list(dict.fromkeys(connections))
        self.streams = streams
        self.pushes = 0
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
        while (event := self._queue.get()) is not _END:
            data = json.dumps(event, ensure_ascii=False, default=str).encode()
            for connection_id in list(self.live):
                self._send(connection_id, data)

    def _send(self, connection_id: str, data: bytes) -> None:
        try:
            self.pusher.post(connection_id, data)
            self.pushes += 1
        except Gone:
            self.live.remove(connection_id)
            try:
                self.streams.close(connection_id)
            except Exception:
                logger.warning("could not forget a gone connection", extra={"connection_id": connection_id})
        except Exception as err:  # throttled, unreachable: this message is lost to this socket only
            logger.warning("a stream message was not delivered", extra={"connection_id": connection_id, "error": repr(err)})


def watchers(deps: _Deps, tenant: str, agent_id: str, session_id: str, run_id: str) -> TurnEvents | None:
    """The events of a turn on a session, for the sockets watching it; None when nobody is (or
    the lookup fails: streaming is never a reason for a turn to fail)."""
    try:
        connections = deps.streams.subscribers(tenant, agent_id, session_id)
    except Exception:
        logger.warning("could not read a session's watchers; the turn runs unwatched", extra={"run_id": run_id})
        return None
    if not connections:
        return None
    return TurnEvents(SocketSink(deps.pusher, connections, deps.streams), run_id)
