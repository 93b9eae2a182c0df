"""Agents that act, as a user of `make dev` does it: the local stack over HTTP, the sample MCP server
beside it (local/sample_mcp.py), the offline model asked to use its tools, a queued turn and a
manual run using them too."""

from __future__ import annotations

import pytest

from local.sample_mcp import start
from tests.e2e.test_local_stack_http import http, wait_for_run
from tests.mcp_servers import Mortal


@pytest.fixture(scope="module")
def sample():
    running = start()
    yield running
    running.stop()


def test_an_agent_calls_the_sample_servers_tools_over_http(live, sample):
    url = live.url.rstrip("/")
    status, created = http(url, "POST", "/api/connections", body={"name": "market", "url": sample.url})
    assert status == 201, created
    conn = created["data"]["id"]
    status, tested = http(url, "POST", f"/api/connections/{conn}/test")
    assert status == 200 and [t["name"] for t in tested["data"]["tools"]] == ["lookup_price", "search_tickets"]
    status, agent = http(
        url,
        "POST",
        "/api/agents",
        body={"name": "Trader", "tools": [{"connectionId": conn}], "defaultPrompt": "use search_tickets with export"},
    )
    assert status == 201, agent
    agent_id = agent["data"]["id"]

    status, turn = http(
        url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "use lookup_price for SOL"}
    )
    assert status == 200, turn
    (call,) = turn["data"]["toolCalls"]
    assert call["name"] == "mcp__market__lookup_price" and "182.3" in call["result"] and call["connection"] == "market"

    # A queued turn and a manual run reach the same tools.
    status, queued = http(
        url,
        "POST",
        f"/api/agents/{agent_id}/sessions/dashboard/messages?async=true",
        body={"message": "use lookup_price for ETH"},
    )
    assert status == 202, queued
    run = wait_for_run(url, queued["data"]["runId"])
    assert run["status"] == "succeeded" and "3412.75" in run["toolCalls"][0]["result"]
    status, manual = http(url, "POST", f"/api/agents/{agent_id}/runs", body={})
    assert status == 202, manual
    run = wait_for_run(url, manual["data"]["runId"])
    assert run["status"] == "succeeded" and "ENG-102" in run["toolCalls"][0]["result"]

    # Another user cannot see or use the connection.
    assert http(url, "GET", f"/api/connections/{conn}", user="mallory")[0] == 404
    status, theirs = http(url, "POST", "/api/agents", user="mallory", body={"name": "Thief", "tools": [{"connectionId": conn}]})
    assert status == 404 and theirs["error"]["code"] == "connection_not_found"


def test_a_server_that_dies_is_remembered_skipped_and_welcomed_back_over_http(live):
    url = live.url.rstrip("/")
    mortal = Mortal.start()
    try:
        status, created = http(url, "POST", "/api/connections", body={"name": "mortal", "url": mortal.url})
        assert status == 201, created
        conn = created["data"]["id"]
        status, agent = http(url, "POST", "/api/agents", body={"name": "Watcher", "tools": [{"connectionId": conn}]})
        agent_id = agent["data"]["id"]

        def say(message: str) -> dict:
            status, turn = http(url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": message})
            assert status == 200, turn
            (call,) = turn["data"]["toolCalls"]
            return call

        def health() -> dict:
            return http(url, "GET", f"/api/connections/{conn}")[1]["data"]["health"]

        assert "97250.5" in say("use lookup_price for BTC")["result"]
        assert health()["state"] == "healthy"
        mortal.stop()
        assert say("use lookup_price for BTC")["error"] == "unreachable"
        assert say("use lookup_price for ETH")["error"] == "unreachable"
        down = health()
        assert down["state"] == "down" and down["lastError"]["code"] == "unreachable" and down["retryAfter"]
        # Skipped: the call answers at once with the reason, without contacting the server.
        skipped = say("use lookup_price for SOL")
        assert skipped["error"] == "unavailable" and "failed 2 times in a row" in skipped["result"]

        # Back: the owner's test probes it, and the agent's next turn uses it again.
        mortal.restart()
        assert http(url, "POST", f"/api/connections/{conn}/test")[1]["data"]["ok"] is True
        assert health()["state"] == "healthy"
        assert "182.3" in say("use lookup_price for SOL")["result"]
    finally:
        mortal.stop()
