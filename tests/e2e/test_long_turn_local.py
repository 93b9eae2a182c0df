"""A turn that takes minutes (ST1), as `make dev` runs it: the local stack with its real budgets (the
sync route's 25 s, the worker's TURN_BUDGET_SECONDS of 300 s), an MCP tool that answers after three
minutes, and a person watching over the WebSocket. The same turn sent to the sync route answers 504
and commits nothing; over the socket it completes, streams its tool events, and commits once.

This runs in real time (about three minutes): the session lease is renewed, the socket stays open
and the tool call is bounded by the connection's timeout and the turn's budget, as in AWS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_local_stack_http import http
from tests.e2e.test_stream_local import open_socket
from tests.mcp_servers import McpServers

TOOL_SECONDS = 180


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def test_a_three_minute_turn_completes_over_the_socket_while_the_sync_route_answers_504(live, servers):
    url = live.url.rstrip("/")
    status, created = http(
        url, "POST", "/api/connections", body={"name": "jobs", "url": servers.url("faulty"), "timeoutSeconds": 240}
    )
    assert status == 201, created
    status, agent = http(url, "POST", "/api/agents", body={"name": "Builder", "tools": [{"connectionId": created["data"]["id"]}]})
    assert status == 201, agent
    agent_id = agent["data"]["id"]
    message = f"use slow with {TOOL_SECONDS}"
    for session in ("build", "sync-try"):
        status, body = http(url, "POST", f"/api/agents/{agent_id}/sessions", body={"id": session})
        assert status == 201, body

    # The sync route first, on another session: its budget ends long before the tool answers.
    sync: dict[str, Any] = {}
    path = f"/api/agents/{agent_id}/sessions/sync-try/messages"
    sync["status"], sync["body"] = http(url, "POST", path, body={"message": message})

    with open_socket(url) as ws:
        frame = {"action": "turn", "agentId": agent_id, "sessionId": "build", "message": message, "clientTurnId": "long"}
        ws.send(json.dumps(frame))
        frames = []
        while not frames or frames[-1]["type"] not in ("turn.completed", "turn.failed"):
            frames.append(json.loads(ws.recv(timeout=TOOL_SECONDS + 60)))

    assert sync["status"] == 504 and sync["body"]["error"]["code"] == "turn_timeout", sync
    assert "?async=true" in sync["body"]["error"]["message"]
    status, untouched = http(url, "GET", f"/api/agents/{agent_id}/sessions/sync-try")
    assert status == 200 and untouched["data"]["messageCount"] == 0

    kinds = [f["type"] for f in frames if "seq" in f]
    assert kinds[-1] == "turn.completed", frames
    assert kinds[0] == "turn.started" and kinds[-1] == "turn.completed"
    assert kinds.index("tool.started") < kinds.index("tool.finished")
    finished = next(f for f in frames if f["type"] == "tool.finished")
    assert finished["name"] == "mcp__jobs__slow" and not finished.get("isError"), finished
    completed = frames[-1]
    (call,) = completed["toolCalls"]
    assert call["result"] == "finally"

    status, run = http(url, "GET", f"/api/runs/{completed['runId']}")
    assert run["data"]["status"] == "succeeded"
    status, session = http(url, "GET", f"/api/agents/{agent_id}/sessions/build")
    assert session["data"]["messageCount"] == 4  # user, tool use, tool result, answer: committed once
    assert session["data"]["messages"][-1]["content"][0]["text"] == completed["reply"]
    # The lease was freed: the session takes the next turn at once.
    status, after = http(url, "POST", f"/api/agents/{agent_id}/sessions/build/messages", body={"message": "done?"})
    assert status == 200, after
