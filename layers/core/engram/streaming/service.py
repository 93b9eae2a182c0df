"""The WebSocket API's use cases (ST2): tickets, opening and closing a socket, and what a client
sends over it (`turn`, `subscribe`, `unsubscribe`). Replies are the frames API Gateway sends back
on the socket (the $default route's response); a turn's events come from the worker (sink)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from engram.conversations import chat
from engram.kernel.errors import BadRequest, EngramError, NotFound, Unauthorized, error_body, error_of, invalid_input, not_json
from engram.kernel.observability import logger
from engram.streaming.models import ResumeMessage, SubscribeMessage, TurnMessage
from engram.wiring.model import ModelDeps

if TYPE_CHECKING:
    from engram.kernel.settings import Settings
    from engram.streaming.ports import Streams

MAX_FRAME_BYTES = 32 * 1024  # API Gateway closes a socket on a client frame over 32 KB (1009)


def connect(streams: Streams, settings: Settings, connection_id: str, query: dict[str, str] | None) -> None:
    """$connect: the ticket (query `ticket`) is taken, once; without one the socket is refused."""
    ticket = (query or {}).get("ticket")
    if not ticket:
        raise Unauthorized("a ticket is required: POST /api/stream-tickets, then connect with ?ticket=", code="ticket_required")
    try:
        taken = streams.take_ticket(ticket)
    except BadRequest:
        taken = None
    if taken is None:
        raise Unauthorized("the ticket is unknown, used or expired; get a new one", code="ticket_refused")
    tenant, key_id = taken
    streams.open(
        tenant,
        connection_id,
        ttl_s=settings.stream_connection_ttl_s,
        limit=settings.max_stream_connections,
        key_id=key_id,
    )


def disconnect(streams: Streams, connection_id: str) -> None:
    streams.close(connection_id)


def _decoded(raw: str | bytes) -> object:
    """The frame as JSON, or a 400 naming what is wrong: over API Gateway's 32 KB, not UTF-8
    text, not JSON, or nested too deeply to read (json raises RecursionError)."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_FRAME_BYTES:
        raise BadRequest(
            f"the frame is over {MAX_FRAME_BYTES // 1024} KB (API Gateway's limit); send a long message over HTTP "
            "(POST .../messages?async=true) and watch it here",
            field="body",
            code="payload_too_large",
        )
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("the frame is not UTF-8 text", field="body", code="invalid_body") from None
    try:
        body = json.loads(raw or "null")
        json.dumps(body, ensure_ascii=False).encode()  # a lone surrogate ("\\ud800") is no text to store
    except RecursionError:
        raise BadRequest("the frame is nested too deeply", field="body", code="invalid_body") from None
    except UnicodeEncodeError:
        raise BadRequest("the frame holds a string that is not UTF-8 text", field="body", code="invalid_body") from None
    except ValueError:
        raise not_json("the frame") from None
    return body


def _parsed(body: object) -> TurnMessage | SubscribeMessage | ResumeMessage:
    action = body.get("action") if isinstance(body, dict) else None
    model: type[TurnMessage | SubscribeMessage | ResumeMessage]
    if action == "turn":
        model = TurnMessage
    elif action in ("subscribe", "unsubscribe"):
        model = SubscribeMessage
    elif action == "resume":
        model = ResumeMessage
    else:
        raise BadRequest("action must be turn, subscribe, unsubscribe or resume", field="action", code="validation_error")
    try:
        return model.model_validate(body)
    except ValidationError as err:
        raise invalid_input(err.errors(), what="the message") from None


def on_message(deps: ModelDeps, connection_id: str, raw: str | bytes) -> dict[str, object]:
    """A client's frame; the answer is the frame sent back (an error names what was wrong).
    Nothing a client sends makes the invocation fail: every failure is an error frame."""
    reference: dict[str, object] = {}
    try:
        connection = deps.streams.connection(connection_id)
        if connection is None:
            raise Unauthorized("this connection is closed; open a new one with a new ticket", code="connection_closed")
        tenant, watching, key_id = connection
        if key_id and not deps.api_keys.alive(tenant, key_id, int(time.time())):  # expired since it opened
            deps.streams.close(connection_id)
            deps.pusher.disconnect(connection_id)
            raise Unauthorized("the API key this connection was opened with has expired or was revoked", code="key_revoked")
        body = _decoded(raw)
        reference = _reference(body)
        msg = _parsed(body)
        if isinstance(msg, TurnMessage):
            return _turn(deps, tenant, connection_id, msg, watching)
        if isinstance(msg, ResumeMessage):
            return _resume(deps, tenant, connection_id, msg, watching)
        ttl = deps.settings.stream_connection_ttl_s
        if msg.action == "subscribe":
            deps.streams.subscribe(tenant, connection_id, msg.agent_id, msg.session_id, ttl)
        else:
            deps.streams.unsubscribe(tenant, connection_id, msg.agent_id, msg.session_id)
        return {"type": f"{msg.action}d", "agentId": msg.agent_id, "sessionId": msg.session_id}
    except EngramError as err:
        return {"type": "error", **reference, "error": error_body(err)}
    except Exception as err:
        logger.exception("a socket message failed")
        return {"type": "error", **reference, "error": error_of(err)}


def _reference(body: object) -> dict[str, object]:
    """The frame's clientTurnId, when it has one, so that even its error names the turn."""
    ref = body.get("clientTurnId") if isinstance(body, dict) else None
    return {"clientTurnId": ref} if isinstance(ref, str) and len(ref) <= 64 else {}


def _turn(deps: ModelDeps, tenant: str, connection_id: str, msg: TurnMessage, watching: set[str]) -> dict[str, object]:
    """Watches the session first (so no event is missed; the subscription checks the session
    exists), then queues the turn once per clientTurnId."""
    # A session watched since before may have gone with its agent: then it is looked up again.
    subscribed = f"{msg.agent_id}/{msg.session_id}" not in watching
    if subscribed:
        deps.streams.subscribe(tenant, connection_id, msg.agent_id, msg.session_id, deps.settings.stream_connection_ttl_s)
    reply = {"type": "turn.queued", "clientTurnId": msg.client_turn_id, "agentId": msg.agent_id, "sessionId": msg.session_id}
    run = chat.enqueue_turn(
        deps,
        tenant=tenant,
        agent_id=msg.agent_id,
        session_id=msg.session_id,
        message=msg.message,
        trigger="socket",
        session_checked=subscribed,
        client_turn_id=msg.client_turn_id,
    )
    return {**reply, "runId": run.id, "status": run.status}


def _resume(deps: ModelDeps, tenant: str, connection_id: str, msg: ResumeMessage, watching: set[str]) -> dict[str, object]:
    """Watches the run's session first, then posts the run's kept events after `afterSeq`: an
    event the turn keeps after the subscription is posted to this socket live, one kept before
    it is in what is read here, so nothing is missed. An event may come both ways; its seq tells
    (the clients drop a seq they have), never one up to `afterSeq` (the subscription says where it
    resumed: streaming.sink). The answer says how many were replayed and the run's
    status: a finished run's last event is among them."""
    run = deps.runs.get(tenant, msg.run_id)
    if run is None or not run.session_id:
        raise NotFound("run not found", field="runId")
    if f"{run.agent_id}/{run.session_id}" not in watching:
        ttl = deps.settings.stream_connection_ttl_s
        deps.streams.subscribe(tenant, connection_id, run.agent_id, run.session_id, ttl, resumed=(run.id, msg.after_seq))
    replayed = 0
    for data in deps.streams.events_after(tenant, run.id, msg.after_seq):
        deps.pusher.post(connection_id, data.encode())
        replayed += 1
    status = (deps.runs.get(tenant, run.id) or run).status
    return {
        "type": "resumed",
        "runId": run.id,
        "agentId": run.agent_id,
        "sessionId": run.session_id,
        "afterSeq": msg.after_seq,
        "replayed": replayed,
        "status": status,
    }
