"""The WebSocket API locally (ST3): the template's WEBSOCKET API on its own port, with the same
handler as in AWS (the function its integration names), and its management API for the workers.

    ws://127.0.0.1:3002/?ticket=...      $connect (the handshake is refused with the handler's
                                         status), each frame to $default (its answer sent back,
                                         as the route response does), $disconnect when it closes
    POST   <http front>/@stream/@connections/{id}   what the worker posts (410 GoneException when
    DELETE <http front>/@stream/@connections/{id}   the socket is not open), as execute-api does

API Gateway's limits hold here too (ST6): a binary frame closes the socket with 1003, a client
frame over 32 KB with 1009 (the handler is not invoked for either), a socket with no message either
way for `idle_s` (10 minutes) closes, and so does one older than `lifetime_s` (2 hours), both
with 1001 (LOCAL_SOCKET_IDLE_SECONDS, LOCAL_SOCKET_LIFETIME_SECONDS; tests shorten them).

DNS rebinding: like the HTTP front (local/apigw.py), the handshake is refused with 421 unless its
`Host` is a loopback name (localhost, *.localhost, 127.x.x.x, [::1]), before the handler is invoked
or a ticket taken: a page whose name was made to point at 127.0.0.1 sends its own name as `Host`.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import threading
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .apigw import MISDIRECTED, Functions, loopback_host
from .template import Template

log = logging.getLogger("engram.local")
MANAGEMENT_PREFIX = "/@stream"
MAX_CLIENT_FRAME = 32 * 1024  # API Gateway's limit on a frame a client sends
MAX_POSTED = 128 * 1024  # and on a message posted to a connection
IDLE_S = 600.0
LIFETIME_S = 7200.0


def _referenced(node: Any) -> list[str]:
    """The resources a template value names (Ref, GetAtt, Sub variables), in order."""
    if isinstance(node, dict):
        if "Ref" in node:
            return [str(node["Ref"]).split(".")[0]]
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            return [str(target[0] if isinstance(target, list) else target).split(".")[0]]
        return [name for value in node.values() for name in _referenced(value)]
    if isinstance(node, list):
        return [name for value in node for name in _referenced(value)]
    return []


def socket_function(template: Template) -> str | None:
    """The function the WebSocket API's integration invokes (its `IntegrationUri` names it)."""
    resources = template.resources
    apis = {
        name
        for name, res in resources.items()
        if res.get("Type") == "AWS::ApiGatewayV2::Api" and (res.get("Properties") or {}).get("ProtocolType") == "WEBSOCKET"
    }
    for res in resources.values():
        props = res.get("Properties") or {}
        if res.get("Type") == "AWS::ApiGatewayV2::Integration" and set(_referenced(props.get("ApiId"))) & apis:
            for name in _referenced(props.get("IntegrationUri")):
                if (resources.get(name) or {}).get("Type") == "AWS::Serverless::Function":
                    return name
    return None


class LocalSockets:
    def __init__(self, functions: Functions, function_id: str, host: str, port: int):
        self.function = functions[function_id]
        self.host, self.port = host, port
        self.open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self.idle_s = float(os.environ.get("LOCAL_SOCKET_IDLE_SECONDS") or IDLE_S)
        self.lifetime_s = float(os.environ.get("LOCAL_SOCKET_LIFETIME_SECONDS") or LIFETIME_S)
        self._active: dict[str, float] = {}  # connection id -> when a message last went either way

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def start(self) -> None:
        from websockets.sync.server import serve  # the local stack's own dependency (requirements-dev)

        # max_queue=None: a flood of frames waits in memory for the handler (API Gateway answers
        # every one) instead of stopping the reads, which would leave the keepalive's pongs unread.
        self._server = serve(
            self._session,
            self.host,
            self.port,
            process_request=self._connect,
            compression=None,
            max_size=MAX_CLIENT_FRAME,
            max_queue=None,
        )
        threading.Thread(target=self._server.serve_forever, name="engram-sockets", daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def _event(self, kind: str, connection_id: str, **extra: Any) -> dict[str, Any]:
        context = {
            "eventType": kind,
            "connectionId": connection_id,
            "routeKey": {"CONNECT": "$connect", "DISCONNECT": "$disconnect"}.get(kind, "$default"),
            "stage": "live",
            "domainName": f"{self.host}:{self.port}",
            "apiId": "local",
        }
        return {"requestContext": context, "isBase64Encoded": False, **extra}

    def _connect(self, connection: Any, request: Any) -> Any:
        """$connect, during the handshake: a refusal is the handler's status, as API Gateway answers
        (a Host that is not a loopback name is refused first, 421, with nothing invoked)."""
        if not loopback_host(request.headers.get("Host", "")):
            return connection.respond(HTTPStatus.MISDIRECTED_REQUEST, MISDIRECTED)
        # Like API Gateway's (e.g. "L0SM9cOFvHcCIhw="): base64, so the management API's path is URL-encoded.
        connection_id = base64.b64encode(secrets.token_bytes(10)).decode()
        connection.engram_id = connection_id
        query = {k: v[-1] for k, v in parse_qs(urlsplit(request.path).query).items()}
        answer = self.function.invoke(self._event("CONNECT", connection_id, queryStringParameters=query or None)) or {}
        status = int(answer.get("statusCode", 200))
        if status != 200:
            return connection.respond(HTTPStatus(status), answer.get("body") or HTTPStatus(status).phrase)
        with self._lock:
            self.open[connection_id] = connection
        return None

    def _session(self, connection: Any) -> None:
        connection_id = connection.engram_id
        opened = time.monotonic()
        self._active[connection_id] = opened
        try:
            while True:
                now = time.monotonic()
                idle_left = self._active.get(connection_id, now) + self.idle_s - now
                life_left = opened + self.lifetime_s - now
                if idle_left <= 0 or life_left <= 0:  # API Gateway's idle and lifetime limits
                    connection.close(1001, "Going away")
                    break
                try:
                    frame = connection.recv(timeout=min(idle_left, life_left, 1.0))
                except TimeoutError:
                    continue
                self._active[connection_id] = time.monotonic()
                if not isinstance(frame, str):
                    connection.close(1003, "Unsupported data: binary frames are not supported")
                    break
                answer = self.function.invoke(self._event("MESSAGE", connection_id, body=frame)) or {}
                if answer.get("body"):
                    connection.send(answer["body"])
        except Exception as err:  # the socket went away (or sent a frame over 32 KB: 1009)
            log.debug("socket %s ended: %r", connection_id, err)
        finally:
            with self._lock:
                self.open.pop(connection_id, None)
            self._active.pop(connection_id, None)
            self.function.invoke(self._event("DISCONNECT", connection_id))

    # --- the management API (the HTTP front hands these over) -----------------------------------
    def manage(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        connection_id = unquote(path.removeprefix(f"{MANAGEMENT_PREFIX}/@connections/").split("?", 1)[0])
        with self._lock:
            connection = self.open.get(connection_id)
        if connection is None:
            gone = json.dumps({"message": "Gone"}).encode()
            return 410, {"x-amzn-ErrorType": "GoneException", "content-type": "application/json"}, gone
        if method == "POST" and len(body) > MAX_POSTED:  # PostToConnection refuses a message over 128 KB
            too_large = json.dumps({"message": "Request entity too large"}).encode()
            return 413, {"x-amzn-ErrorType": "PayloadTooLargeException", "content-type": "application/json"}, too_large
        try:
            if method == "POST":
                connection.send(body.decode("utf-8", "replace"))
                self._active[connection_id] = time.monotonic()
            elif method == "DELETE":
                connection.close()
        except Exception:
            return 410, {"x-amzn-ErrorType": "GoneException", "content-type": "application/json"}, b'{"message": "Gone"}'
        return 200, {"content-type": "application/json"}, b"{}"
