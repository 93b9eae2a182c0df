"""Approving what an agent does (TL10), as a user of `make dev` does it: the local stack over HTTP and
its WebSocket, the sample MCP server beside it (local/sample_mcp.py), the offline model asked to use
a tool that waits for approval; the Python client's operations and its stream's `follow`."""

from __future__ import annotations

import json

import pytest

from local.sample_mcp import start
from tests.e2e.test_local_stack_http import http, wait_for_run
from tests.e2e.test_stream_local import open_socket, until


@pytest.fixture(scope="module")
def sample():
    running = start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


def held_agent(url: str, sample_url: str, name: str) -> str:
    status, created = http(url, "POST", "/api/connections", body={"name": name, "url": sample_url})
    assert status == 201, created
    grant = {"connectionId": created["data"]["id"], "requireApproval": ["lookup_price"]}
    status, agent = http(url, "POST", "/api/agents", body={"name": "Trader", "tools": [grant]})
    assert status == 201, agent
    return str(agent["data"]["id"])


def pairs_intact(messages: list[dict]) -> bool:
    for i, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if uses and [b.get("tool_use_id") for b in messages[i + 1]["content"] if b.get("type") == "tool_result"] != uses:
            return False
    return True


def test_a_socket_turn_waits_for_approval_then_streams_on_under_the_same_run(url, sample):
    agent_id = held_agent(url, sample.url, "market")
    with open_socket(url) as ws:
        turn = {
            "action": "turn",
            "agentId": agent_id,
            "sessionId": "dashboard",
            "message": "use lookup_price for BTC",
            "clientTurnId": "a1",
        }
        ws.send(json.dumps(turn))
        frames = until(ws, "approval.requested")
        requested = frames[-1]
        (held,) = requested["pendingApprovals"]
        assert held["name"] == "mcp__market__lookup_price" and held["input"] == {"symbol": "BTC"}
        run_id = requested["runId"]
        assert http(url, "GET", f"/api/runs/{run_id}")[1]["data"]["status"] == "awaiting_approval"
        # Another user cannot decide it; the owner approves.
        body = {"toolUseId": held["toolUseId"], "decision": "approve"}
        assert http(url, "POST", f"/api/runs/{run_id}/approvals", user="mallory", body=body)[0] == 404
        status, decided = http(url, "POST", f"/api/runs/{run_id}/approvals", body=body)
        assert status == 200, decided
        rest = until(ws, "turn.completed")  # the socket watches the session: the resumed turn arrives
    events = [f for f in frames + rest if f.get("runId") == run_id and "seq" in f and f["type"] != "turn.keepalive"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # one sequence across the pause
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn.started" and kinds.count("turn.started") == 1
    after = kinds[kinds.index("approval.requested") + 1 :]
    assert after[:3] == ["approval.decided", "tool.started", "tool.finished"] and after[-1] == "turn.completed"
    assert "97250.5" in events[-1]["reply"]
    status, session = http(url, "GET", f"/api/agents/{agent_id}/sessions/dashboard")
    assert pairs_intact(session["data"]["messages"])
    assert http(url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "hi"})[0] == 200


def test_the_python_client_lists_decides_and_follows(url, sample):
    from engram_client import Client

    agent_id = held_agent(url, sample.url, "desk")
    with Client(url, "dev-alice") as client:
        paused = client.send_message(agent_id, "dashboard", "use lookup_price for ETH")
        assert paused.get("status") == "awaiting_approval"
        waiting = [r for r in client.iter_waiting() if r["agentId"] == agent_id]
        assert [r["id"] for r in waiting] == [paused["runId"]]
        busy = http(url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "hello"})
        assert busy[0] == 409 and busy[1]["error"]["code"] == "approval_pending"
        run = client.deny(paused["runId"], waiting[0]["pendingApprovals"][0]["toolUseId"], "not now")
        assert run["pendingApprovals"][0]["decision"] == "deny"
        with client.stream() as stream:
            events = list(stream.follow(paused["runId"], after_seq=0))
        assert events[-1]["type"] == "turn.completed"
        done = wait_for_run(url, paused["runId"])
        assert done["toolCalls"][0]["isError"] is True and "not now" in done["toolCalls"][0]["result"]
        assert not list(client.iter_waiting(agent_id=agent_id))
