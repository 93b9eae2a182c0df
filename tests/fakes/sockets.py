"""The WebSocket API's management API (apigatewaymanagementapi) as the worker sees it: each open
connection keeps what was posted to it; posting to one that is not open is a GoneException, and a
message over 128 KB is refused (PayloadTooLargeException), as API Gateway refuses it."""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.fakes import client_error

MAX_POSTED = 128 * 1024


class FakeManagementApi:
    def __init__(self, region: str = "us-east-1"):
        self.region = region
        self.open: set[str] = set()
        self.sent: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        # connection id -> a test of each message posted to it: once one passes, the socket drops
        # right after it (a forced disconnect at that point of a turn)
        self.cut_after: dict[str, Any] = {}
        self.cut = threading.Event()

    def connect(self, connection_id: str) -> None:
        with self._lock:
            self.open.add(connection_id)
            self.sent.setdefault(connection_id, [])

    def drop(self, connection_id: str) -> None:
        with self._lock:
            self.open.discard(connection_id)

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> dict[str, Any]:
        with self._lock:
            if ConnectionId not in self.open:
                raise client_error("PostToConnection", "GoneException", "", status=410)
            if len(Data) > MAX_POSTED:
                raise client_error("PostToConnection", "PayloadTooLargeException", "Request entity too large", status=413)
            message = json.loads(Data)
            self.sent[ConnectionId].append(message)
            test = self.cut_after.get(ConnectionId)
            if test is not None and test(message):
                self.open.discard(ConnectionId)
                self.cut.set()
        return {}

    def delete_connection(self, *, ConnectionId: str) -> dict[str, Any]:
        self.drop(ConnectionId)
        return {}
