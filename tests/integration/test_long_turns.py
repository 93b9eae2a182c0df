"""Long turns off the request (ST1): a turn that cannot fit the sync route's budget runs in the
chat function's turn-queue worker with TURN_BUDGET_SECONDS, and keeps the fault guarantees."""

from __future__ import annotations

from tests.integration import test_mcp_tools
from tests.integration.test_mcp_tools import acting_agent, connect

servers = test_mcp_tools.servers  # the real MCP servers on loopback, once per module


def test_a_turn_too_long_for_the_sync_route_completes_in_the_worker(stack, servers):
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": 1.5})
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty", timeoutSeconds=10))
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"

    sync = stack.call("POST", path, body={"message": "use slow with 2"})
    assert sync.status == 504 and sync.error["code"] == "turn_timeout"
    assert "?async=true" in sync.error["message"]
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 0

    queued = stack.call("POST", path, body={"message": "use slow with 2"}, query={"async": "true"})
    assert queued.status == 202
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{queued.data['runId']}").data
    assert run["status"] == "succeeded", run
    (call,) = run["toolCalls"]
    assert call["name"] == "mcp__faulty__slow" and call["result"] == "finally"
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["messageCount"] == 4  # user, tool use, tool result, answer: committed once
    assert stack.say(agent["id"], "and now?").status == 200  # the lease was freed


def test_a_long_turn_past_its_own_budget_fails_cleanly_and_frees_the_session(stack, servers):
    stack.deps.settings = stack.deps.settings.model_copy(update={"async_turn_budget_s": 1.5})
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty", timeoutSeconds=10))
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    queued = stack.call("POST", path, body={"message": "use slow with 3"}, query={"async": "true"})
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{queued.data['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "turn_timeout"
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 0
    assert stack.say(agent["id"], "still there?").status == 200
