"""The WebSocket API's events in the chat function: $connect, $disconnect and $default (a
client's frame), each answered as API Gateway expects; the $default route's response is the
frame sent back to the client."""

from __future__ import annotations

import base64
import json
from typing import Any

from engram.kernel.errors import EngramError, error_body
from engram.kernel.observability import logger
from engram.streaming import service
from engram.wiring.model import ModelDeps


def is_socket_event(event: dict[str, Any]) -> bool:
    return (event.get("requestContext") or {}).get("eventType") in ("CONNECT", "DISCONNECT", "MESSAGE")


def handle(deps: ModelDeps, event: dict[str, Any]) -> dict[str, object]:
    context = event["requestContext"]
    kind, connection_id = context["eventType"], context["connectionId"]
    if kind == "CONNECT":
        try:
            service.connect(deps.streams, deps.settings, connection_id, event.get("queryStringParameters"))
        except EngramError as err:
            body = {"success": False, "error": error_body(err)}
            return {"statusCode": err.status, "body": json.dumps(body)}
        return {"statusCode": 200}
    if kind == "DISCONNECT":
        try:
            service.disconnect(deps.streams, connection_id)
        except Exception:  # the rows expire on their own
            logger.warning("could not forget a closed connection", extra={"connection_id": connection_id})
        return {"statusCode": 200}
    raw: str | bytes = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(str(raw))
        except ValueError:
            raw = b"\xff"  # not base64: answered as a frame that is not text
    return {"statusCode": 200, "body": json.dumps(service.on_message(deps, connection_id, raw), ensure_ascii=False)}
