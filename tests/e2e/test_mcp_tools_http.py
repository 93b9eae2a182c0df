"""Agents that act, as a user of `make dev` does it: the local stack over HTTP, the sample MCP server
beside it (local/sample_mcp.py), the offline model asked to use its tools, a queued turn and a
manual run using them too."""

from __future__ import annotations

import pytest

from local.sample_mcp import start
from tests.e2e.test_local_stack_http import http, wait_for_run
from tests.mcp_servers import McpServers, Mortal


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


def test_a_hanging_tool_list_with_a_long_timeout_still_answers_a_sync_turn_over_http(live):
    """Before: a 60 s timeout made every sync turn answer 504 after 60 s, with no run recorded."""
    url = live.url.rstrip("/")
    servers = McpServers.start()
    try:
        body = {"name": "hanging", "url": servers.url("hanging"), "timeoutSeconds": 60}
        conn = http(url, "POST", "/api/connections", body=body)[1]["data"]["id"]
        market = http(url, "POST", "/api/connections", body={"name": "prices", "url": servers.url("sample")})[1]["data"]["id"]
        status, agent = http(
            url, "POST", "/api/agents", body={"name": "Patient", "tools": [{"connectionId": conn}, {"connectionId": market}]}
        )
        assert status == 201, agent
        path = f"/api/agents/{agent['data']['id']}/sessions/dashboard/messages"
        status, turn = http(url, "POST", path, body={"message": "use lookup_price for SOL"})
        assert status == 200, turn
        assert "182.3" in turn["data"]["toolCalls"][0]["result"]
        assert wait_for_run(url, turn["data"]["runId"])["status"] == "succeeded"
        health = http(url, "GET", f"/api/connections/{conn}")[1]["data"]["health"]
        assert health["state"] == "degraded" and health["lastError"]["code"] == "timeout"
        status, again = http(url, "POST", path, body={"message": "use lookup_price for ETH"})
        assert status == 200 and "3412.75" in again["data"]["toolCalls"][0]["result"]
    finally:
        servers.hanging.hang = False
        servers.running.stop()
