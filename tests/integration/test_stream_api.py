"""The WebSocket API (ST2) through the chat function's handler, on the AWS fakes: tickets, a
streamed turn, subscriptions (queued turns, webhooks, heartbeats), a vanished or throttled
socket, quotas. tests/e2e/test_stream_local.py runs the same protocol over real sockets."""

from __future__ import annotations

import json
import secrets
from typing import Any

from engram.kernel.ids import tenant_key
from tests import fakes
from tests.faults import REFUSED
from tests.integration import test_mcp_tools
from tests.integration.test_mcp_tools import acting_agent, connect

servers = test_mcp_tools.servers  # the real MCP servers on loopback, once per module


class Socket:
    """One client's socket, as API Gateway hands its events to the chat function."""

    def __init__(self, stack: Any, *, user: str = "alice", ticket: str | None = None):
        self.stack, self.id = stack, secrets.token_urlsafe(12).replace("-", "A") + "="
        self.api = fakes.active().apigatewaymanagementapi  # type: ignore[union-attr]
        if ticket is None:
            r = stack.call("POST", "/api/stream-tickets", user=user)
            assert r.status == 201, r.body
            ticket = r.data["ticket"]
        query = {"ticket": ticket} if ticket else None
        self.answer = self._invoke("CONNECT", queryStringParameters=query)
        if self.answer["statusCode"] == 200:
            self.api.connect(self.id)

    def _invoke(self, kind: str, **event: Any) -> dict[str, Any]:
        context = {"eventType": kind, "connectionId": self.id, "routeKey": f"${kind.lower()}", "stage": "live"}
        return self.stack.functions["ChatFunction"].invoke({"requestContext": context, **event})

    def send(self, frame: Any) -> dict[str, Any]:
        answer = self._invoke("MESSAGE", body=frame if isinstance(frame, str) else json.dumps(frame))
        return json.loads(answer["body"])

    def turn(self, agent_id: str, message: str, client_turn_id: str = "ct1", session: str = "dashboard") -> dict[str, Any]:
        frame = {"action": "turn", "agentId": agent_id, "sessionId": session, "message": message, "clientTurnId": client_turn_id}
        return self.send(frame)

    def close(self) -> None:
        self.api.drop(self.id)
        self._invoke("DISCONNECT")

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.api.sent.get(self.id, [])

    def of_run(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("runId") == run_id]


# --- tickets ----------------------------------------------------------------------------------
def test_a_ticket_opens_one_socket_once(stack):
    r = stack.call("POST", "/api/stream-tickets")
    assert r.status == 201 and r.data["url"].startswith(("ws://", "wss://")) and r.data["expiresAt"] > 0
    assert Socket(stack, ticket=r.data["ticket"]).answer["statusCode"] == 200
    reused = Socket(stack, ticket=r.data["ticket"]).answer
    assert reused["statusCode"] == 401 and json.loads(reused["body"])["error"]["code"] == "ticket_refused"


def test_missing_unknown_and_expired_tickets_are_refused(stack):
    assert Socket(stack, ticket="").answer["statusCode"] == 401
    assert Socket(stack, ticket="not-a-ticket").answer["statusCode"] == 401
    assert Socket(stack, ticket="x" * 40).answer["statusCode"] == 401
    expired = "e" * 32
    stack.deps.streams.put_ticket(tenant_key("alice"), expired, -1)  # past its TTL, not yet removed by DynamoDB
    assert Socket(stack, ticket=expired).answer["statusCode"] == 401
    assert stack.call("POST", "/api/stream-tickets", user=None).status == 401  # a ticket needs the JWT


def test_a_socket_reaches_only_its_own_users_sessions(stack):
    bobs = stack.agent(user="bob")
    alice = Socket(stack)
    for frame in (
        {"action": "subscribe", "agentId": bobs["id"], "sessionId": "dashboard"},
        {"action": "turn", "agentId": bobs["id"], "sessionId": "dashboard", "message": "hi", "clientTurnId": "x"},
    ):
        answer = alice.send(frame)
        assert answer["type"] == "error" and answer["error"]["code"] == "not_found"
    assert stack.call("GET", f"/api/agents/{bobs['id']}/runs", user="bob").data["items"] == []


def test_a_closed_or_unknown_connection_is_refused(stack):
    socket = Socket(stack)
    socket.close()
    answer = socket.send({"action": "subscribe", "agentId": "ag_x", "sessionId": "dashboard"})
    assert answer["error"]["code"] == "connection_closed"


def test_sockets_per_user_are_bounded(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_stream_connections": 2})
    first, _second = Socket(stack), Socket(stack)
    third = Socket(stack).answer
    assert third["statusCode"] == 409 and json.loads(third["body"])["error"]["code"] == "quota_exceeded"
    assert Socket(stack, user="bob").answer["statusCode"] == 200  # per user
    first.close()
    assert Socket(stack).answer["statusCode"] == 200


def test_bad_frames_get_an_error_naming_the_field(stack):
    socket = Socket(stack)
    assert socket.send("not json")["error"]["code"] == "invalid_body"
    assert socket.send({"action": "dance"})["error"]["field"] == "action"
    bad = socket.send({"action": "turn", "agentId": "a b", "sessionId": "dashboard", "message": "x", "clientTurnId": "c"})
    assert bad["error"]["field"] == "agentId" and bad["clientTurnId"] == "c"


# --- turns ------------------------------------------------------------------------------------
def test_a_turn_sent_on_the_socket_streams_in_order_and_commits(stack):
    agent = stack.agent()
    socket = Socket(stack)
    queued = socket.turn(agent["id"], "stream this please " + "word " * 100)
    assert queued["type"] == "turn.queued" and queued["clientTurnId"] == "ct1" and queued["status"] == "queued"
    stack.drain_turns()
    events = socket.of_run(queued["runId"])
    types = [e["type"] for e in events]
    assert types[0] == "turn.started" and types[-1] == "turn.completed" and "text.delta" in types
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["message"].startswith("stream this please") and events[0]["trigger"] == "socket"
    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"][-1]["content"][0]["text"]
    assert "".join(e["text"] for e in events if e["type"] == "text.delta") == stored == events[-1]["reply"]
    assert stack.call("GET", f"/api/runs/{queued['runId']}").data["status"] == "succeeded"


def test_a_resent_turn_runs_once(stack):
    agent = stack.agent()
    socket = Socket(stack)
    first, again = socket.turn(agent["id"], "once", "same-id"), socket.turn(agent["id"], "once", "same-id")
    assert first["runId"] == again["runId"]
    stack.drain_turns()
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 2


def test_tool_events_arrive_around_an_mcp_call(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "market"))
    socket = Socket(stack)
    run_id = socket.turn(agent["id"], "use lookup_price for BTC")["runId"]
    stack.drain_turns()
    types = [e["type"] for e in socket.of_run(run_id)]
    assert (
        types.index("turn.started") < types.index("tool.started") < types.index("tool.finished") < types.index("turn.completed")
    )


def test_a_client_that_leaves_mid_turn_does_not_affect_it(stack):
    agent = stack.agent()
    socket = Socket(stack)
    run_id = socket.turn(agent["id"], "I will not wait")["runId"]
    socket.close()
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "succeeded"
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["messageCount"] == 2 and "I will not wait" in json.dumps(session["messages"])


def test_a_vanished_socket_is_dropped_and_never_fails_the_turn(stack, faults):
    agent = stack.agent()
    gone, watching = Socket(stack), Socket(stack)
    watching.send({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})
    run_id = gone.turn(agent["id"], "hello")["runId"]
    gone.api.drop(gone.id)  # the client vanished without API Gateway's $disconnect yet
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "succeeded"
    assert [e["type"] for e in watching.of_run(run_id)][-1] == "turn.completed"
    assert gone.id not in stack.deps.streams.subscribers(tenant_key("alice"), agent["id"], "dashboard")


def test_gone_and_throttled_posts_never_fail_the_turn(stack, faults):
    agent = stack.agent()
    socket = Socket(stack)
    faults.add("apigatewaymanagementapi", "PostToConnection", REFUSED, error="LimitExceededException", times=2)
    first = socket.turn(agent["id"], "first", "c1")["runId"]
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{first}").data["status"] == "succeeded"
    assert socket.of_run(first)[-1]["type"] == "turn.completed"  # only the throttled pushes were lost
    faults.add("apigatewaymanagementapi", "PostToConnection", REFUSED, error="GoneException", times=1)
    second = socket.turn(agent["id"], "second", "c2")["runId"]
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{second}").data["status"] == "succeeded"
    assert socket.of_run(second) == []  # gone at the first push: forgotten, nothing more was sent


# --- subscriptions ----------------------------------------------------------------------------
def test_two_subscribers_both_see_a_heartbeat_and_a_webhook(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt="Check the news.", activeMemory=True)
    tabs = [Socket(stack), Socket(stack)]
    for tab in tabs:
        assert tab.send({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})["type"] == "subscribed"
    stack.fire(agent["id"])
    for tab in tabs:
        started, *_, done = tab.events
        assert started["type"] == "turn.started" and started["kind"] == "heartbeat" and done["type"] == "turn.completed"
    secret = stack.call("POST", "/api/agents", body={"name": "Hook", "persona": "p"}).data
    hooked = Socket(stack)
    hooked.send({"action": "subscribe", "agentId": secret["id"], "sessionId": "dashboard"})
    assert stack.webhook(secret["id"], secret["webhookSecret"], {"message": "from outside"}).status == 202
    stack.drain_turns()
    assert hooked.events[0]["trigger"] == "webhook" and hooked.events[-1]["type"] == "turn.completed"


def test_an_unsubscribed_socket_sees_nothing(stack):
    agent = stack.agent()
    socket = Socket(stack)
    socket.send({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})
    assert socket.send({"action": "unsubscribe", "agentId": agent["id"], "sessionId": "dashboard"})["type"] == "unsubscribed"
    stack.call("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "x"}, query={"async": "true"})
    stack.drain_turns()
    assert socket.events == []


def test_deleting_the_account_forgets_its_sockets(stack):
    agent = stack.agent()
    socket = Socket(stack)
    socket.turn(agent["id"], "hello")
    assert stack.call("DELETE", "/api/me").status == 200
    answer = socket.send({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})
    assert answer["error"]["code"] == "connection_closed"
    assert stack.deps.table.query_all(tenant_key("alice")) == []
