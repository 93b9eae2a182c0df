"""The WebSocket API of the local stack (ST3) over real sockets on loopback, with the `websockets`
client: what `make dev` streams, through the same handlers and management API as in AWS."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.e2e.test_local_stack_http import http, new_agent, wait_for_run


@pytest.fixture(scope="module")
def stack_url(live):
    return live.url.rstrip("/")


def ticket(url: str, user: str = "alice") -> dict[str, Any]:
    status, body = http(url, "POST", "/api/stream-tickets", user=user)
    assert status == 201, body
    return body["data"]


def open_socket(url: str, user: str = "alice") -> ClientConnection:
    t = ticket(url, user)
    return connect(f"{t['url']}/?ticket={t['ticket']}", open_timeout=10)


def until(ws: ClientConnection, kind: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The frames received up to and including the first of type `kind`."""
    frames = []
    while True:
        frame = json.loads(ws.recv(timeout=timeout))
        frames.append(frame)
        if frame["type"] == kind:
            return frames


def test_a_turn_streams_over_the_local_socket_and_the_deltas_are_the_reply(stack_url):
    agent = new_agent(stack_url)
    with open_socket(stack_url) as ws:
        frame = {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "message": "hi " * 150, "clientTurnId": "t1"}
        ws.send(json.dumps(frame))
        frames = until(ws, "turn.completed")
    queued = next(f for f in frames if f["type"] == "turn.queued")
    events = [f for f in frames if f.get("runId") == queued["runId"] and "seq" in f]
    assert [e["type"] for e in events][0] == "turn.started" and [e["seq"] for e in events] == list(range(1, len(events) + 1))
    reply = "".join(e["text"] for e in events if e["type"] == "text.delta")
    status, session = http(stack_url, "GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    assert reply == events[-1]["reply"] == session["data"]["messages"][-1]["content"][0]["text"]


def test_tickets_are_refused_when_reused_or_missing(stack_url):
    t = ticket(stack_url)
    with connect(f"{t['url']}/?ticket={t['ticket']}", open_timeout=10):
        pass
    for url in (f"{t['url']}/?ticket={t['ticket']}", f"{t['url']}/"):
        with pytest.raises(InvalidStatus) as refused:
            connect(url, open_timeout=10)
        assert refused.value.response.status_code == 401


def test_a_handshake_whose_host_is_not_a_loopback_name_is_refused_and_its_ticket_kept(stack_url):
    """DNS rebinding: a page whose name resolves to 127.0.0.1 connects to this very port, but its
    handshake carries the page's own name as `Host`: 421, before the ticket is looked at."""
    t = ticket(stack_url)
    port = int(t["url"].rsplit(":", 1)[1])
    for host in ("rebind.example", "127.0.0.1.nip.io", "localhost.example"):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://{host}:{port}/?ticket={t['ticket']}", sock=sock, open_timeout=10)
        assert refused.value.response.status_code == 421
        assert b"loopback Host" in refused.value.response.body
    for host in ("localhost", "engram.localhost"):  # loopback names are served (the ticket was not taken)
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        with connect(f"ws://{host}:{port}/?ticket={t['ticket']}", sock=sock, open_timeout=10) as ws:
            ws.send(json.dumps({"action": "subscribe", "agentId": "ag_nope", "sessionId": "dashboard"}))
            assert json.loads(ws.recv(timeout=10))["type"] == "error"
        t = ticket(stack_url)


def test_two_tabs_see_a_queued_turn_and_one_that_leaves_does_not_stop_it(stack_url):
    agent = new_agent(stack_url)
    with open_socket(stack_url) as first, open_socket(stack_url) as second:
        for ws in (first, second):
            ws.send(json.dumps({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"}))
            assert json.loads(ws.recv(timeout=10))["type"] == "subscribed"
        path = f"/api/agents/{agent['id']}/sessions/dashboard/messages?async=true"
        status, queued = http(stack_url, "POST", path, body={"message": "queued from elsewhere"})
        assert status == 202
        for ws in (first, second):
            done = until(ws, "turn.completed")
            assert done[0]["type"] == "turn.started" and done[0]["message"] == "queued from elsewhere"
        first.send(
            json.dumps(
                {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "message": "bye", "clientTurnId": "b"}
            )
        )
        run_id = until(first, "turn.queued")[-1]["runId"]
    # both sockets closed, the turn goes on and commits
    assert wait_for_run(stack_url, run_id)["status"] == "succeeded"
    status, session = http(stack_url, "GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    assert session["data"]["messageCount"] == 4
