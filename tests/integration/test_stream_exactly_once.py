"""Exactly once (ST4): a `clientTurnId` names one run whatever the timing of resends. The socket
handlers run concurrently in threads, on moto (DynamoDB's conditional writes and transactions),
with latency injected on every DynamoDB call so that a resend arrives while the first send is
between its writes."""

from __future__ import annotations

import json
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engram.streaming import gateway
from tests.faults import STALL

PAIRS = 10


def _socket(stack: Any, user: str = "alice") -> str:
    ticket = stack.call("POST", "/api/stream-tickets", user=user).data["ticket"]
    connection_id = secrets.token_urlsafe(12).replace("-", "A") + "="
    answer = gateway.handle(stack.deps, _event("CONNECT", connection_id, queryStringParameters={"ticket": ticket}))
    assert answer["statusCode"] == 200, answer
    return connection_id


def _event(kind: str, connection_id: str, **extra: Any) -> dict[str, Any]:
    return {"requestContext": {"eventType": kind, "connectionId": connection_id, "stage": "live"}, **extra}


def _send(stack: Any, connection_id: str, frame: dict[str, Any]) -> dict[str, Any]:
    answer = gateway.handle(stack.deps, _event("MESSAGE", connection_id, body=json.dumps(frame)))
    return json.loads(str(answer["body"]))


def _turn(agent_id: str, client_turn_id: str, session: str = "dashboard") -> dict[str, Any]:
    return {"action": "turn", "agentId": agent_id, "sessionId": session, "message": "once only", "clientTurnId": client_turn_id}


def _slow_writes(faults: Any, seconds: float = 0.01) -> None:
    """10 ms on every DynamoDB write: a resend's read lands between the first send's writes."""
    for operation in ("TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem"):
        faults.add("dynamodb", operation, STALL, seconds=seconds, times=10_000)


def test_concurrent_resends_run_once(moto_stack, faults):
    agent = moto_stack.agent()
    sockets = [_socket(moto_stack), _socket(moto_stack)]  # a client that reconnected sends again on its new socket
    _slow_writes(faults)
    gate = threading.Barrier(2 * PAIRS)

    def send(i: int) -> dict[str, Any]:
        gate.wait()
        return _send(moto_stack, sockets[i % 2], _turn(agent["id"], f"pair-{i // 2}"))

    with ThreadPoolExecutor(2 * PAIRS) as pool:
        answers = list(pool.map(send, range(2 * PAIRS)))
    faults.clear()
    assert all(a["type"] == "turn.queued" for a in answers), answers
    for pair in range(PAIRS):
        assert answers[2 * pair]["runId"] == answers[2 * pair + 1]["runId"]
    assert len({a["runId"] for a in answers}) == PAIRS
    moto_stack.drain_turns()
    runs = moto_stack.runs(agent["id"])
    assert len(runs) == PAIRS and {r["status"] for r in runs} == {"succeeded"}
    session = moto_stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["messageCount"] == 2 * PAIRS


def test_a_resend_after_the_turn_ran_answers_with_its_run(moto_stack):
    agent = moto_stack.agent()
    socket = _socket(moto_stack)
    first = _send(moto_stack, socket, _turn(agent["id"], "done-once"))
    moto_stack.drain_turns()
    again = _send(moto_stack, _socket(moto_stack), _turn(agent["id"], "done-once"))
    assert again["runId"] == first["runId"] and again["status"] == "succeeded"
    moto_stack.drain_turns()
    assert len(moto_stack.runs(agent["id"])) == 1


def test_the_same_client_turn_id_on_another_agent_or_session_is_another_turn(moto_stack):
    ada, bea = moto_stack.agent(), moto_stack.agent(name="Bea")
    r = moto_stack.call("POST", f"/api/agents/{ada['id']}/sessions", body={"id": "other"})
    assert r.status == 201, r.body
    socket = _socket(moto_stack)
    on_ada = _send(moto_stack, socket, _turn(ada["id"], "shared-id"))
    on_bea = _send(moto_stack, socket, _turn(bea["id"], "shared-id"))
    on_other = _send(moto_stack, socket, _turn(ada["id"], "shared-id", session="other"))
    assert len({on_ada["runId"], on_bea["runId"], on_other["runId"]}) == 3
    moto_stack.drain_turns()
    for agent, count in ((ada, 2), (bea, 1)):
        runs = moto_stack.runs(agent["id"])
        assert len(runs) == count and {r["status"] for r in runs} == {"succeeded"}


def test_another_users_client_turn_id_is_theirs_alone(moto_stack):
    ada, bobs = moto_stack.agent(), moto_stack.agent(user="bob")
    mine = _send(moto_stack, _socket(moto_stack), _turn(ada["id"], "same"))
    theirs = _send(moto_stack, _socket(moto_stack, user="bob"), _turn(bobs["id"], "same"))
    assert mine["runId"] != theirs["runId"]
    assert moto_stack.call("GET", f"/api/runs/{mine['runId']}", user="bob").status == 404
