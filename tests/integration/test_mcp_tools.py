"""Agents that act (TL1-TL6): connections to real MCP servers on loopback (the official SDK's
MCPServer over Streamable HTTP), their tools in chat turns and runs, and every way a server can
fail: down, 401, slow, huge, malformed, not MCP, raising, hostile, its tool list changing."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from engram.kernel.ids import tenant_key
from tests.mcp_servers import INJECTION, McpServers

SECRET = "Bearer good-token"


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def connect(
    stack: Any, servers: McpServers, name: str, server: str = "sample", user: str = "alice", **fields: Any
) -> dict[str, Any]:
    r = stack.call("POST", "/api/connections", user=user, body={"name": name, "url": servers.url(server), **fields})
    assert r.status == 201, r.body
    return r.data


def acting_agent(stack: Any, *connections: dict[str, Any], user: str = "alice", **fields: Any) -> dict[str, Any]:
    return stack.agent(user=user, tools=[{"connectionId": c["id"]} for c in connections], **fields)


# --- connections -------------------------------------------------------------------------------
def test_a_connection_is_created_listed_changed_and_deleted_without_its_auth_value(stack, servers):
    created = connect(stack, servers, "market", "auth", authHeader={"name": "Authorization", "value": SECRET})
    assert created["hasAuth"] is True and created["authHeaderName"] == "Authorization"
    assert SECRET not in json.dumps(created) and "value" not in json.dumps(created)
    listed = stack.call("GET", "/api/connections").data["items"]
    assert [c["name"] for c in listed] == ["market"] and SECRET not in json.dumps(listed)
    one = stack.call("GET", f"/api/connections/{created['id']}").data
    assert one["tools"] is None and SECRET not in json.dumps(one)

    renamed = stack.call("PATCH", f"/api/connections/{created['id']}", body={"name": "prices", "timeoutSeconds": 5})
    assert renamed.status == 200 and renamed.data["name"] == "prices" and renamed.data["timeoutSeconds"] == 5
    cleared = stack.call("PATCH", f"/api/connections/{created['id']}", body={"authHeader": None})
    assert cleared.data["hasAuth"] is False and cleared.data["authHeaderName"] is None
    gone = stack.call("DELETE", f"/api/connections/{created['id']}")
    assert gone.status == 200 and gone.data["deleted"] is True
    assert stack.call("GET", f"/api/connections/{created['id']}").status == 404


def test_bad_connection_bodies_get_a_400_naming_the_field(stack, servers):
    cases = [
        ({"name": "Market!", "url": servers.url("sample")}, "name"),
        ({"name": "a__b", "url": servers.url("sample")}, "name"),
        ({"name": "market", "url": "ftp://example.com/mcp"}, "url"),
        ({"name": "market", "url": "https://user:pw@example.com/mcp"}, "url"),
        ({"name": "market", "url": servers.url("sample"), "authHeader": {"name": "Host", "value": "x"}}, "authHeader.name"),
        ({"name": "market", "url": servers.url("sample"), "authHeader": {"value": "a\r\nX-Evil: 1"}}, "authHeader.value"),
        ({"name": "market", "url": servers.url("sample"), "timeoutSeconds": 0}, "timeoutSeconds"),
        ({"name": "market", "url": servers.url("sample"), "extra": 1}, "extra"),
    ]
    for body, field in cases:
        r = stack.call("POST", "/api/connections", body=body)
        assert r.status == 400, (body, r.body)
        assert r.error["field"] == field, (body, r.error)
    assert stack.call("GET", "/api/connections").data["items"] == []


def test_names_are_unique_per_user_and_the_quota_holds(stack, servers):
    connect(stack, servers, "market")
    dup = stack.call("POST", "/api/connections", body={"name": "market", "url": servers.url("faulty")})
    assert dup.status == 409 and dup.error["code"] == "name_taken"
    connect(stack, servers, "market", user="bob")  # another user's names are theirs
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_connections": 2})
    connect(stack, servers, "faulty", "faulty")
    over = stack.call("POST", "/api/connections", body={"name": "third", "url": servers.url("sample")})
    assert over.status == 409 and over.error["code"] == "quota_exceeded"


def test_another_users_connection_is_not_found_anywhere(stack, servers):
    theirs = connect(stack, servers, "market", user="bob")
    path = f"/api/connections/{theirs['id']}"
    assert stack.call("GET", path).status == 404
    assert stack.call("PATCH", path, body={"name": "mine"}).status == 404
    assert stack.call("DELETE", path).status == 404
    assert stack.call("POST", f"{path}/test").status == 404
    r = stack.call("POST", "/api/agents", body={"name": "Ada", "tools": [{"connectionId": theirs["id"]}]})
    assert r.status == 404 and r.error["code"] == "connection_not_found" and r.error["field"] == "tools"
    assert stack.call("GET", path, user="bob").status == 200


def test_the_test_action_lists_tools_or_names_the_problem(stack, servers):
    cases = {
        "sample": None,
        "auth": "unauthorized",
        "malformed": "malformed_response",
        "shop": "not_mcp",
        "broken": "invalid_tool_schema",
    }
    for server, code in cases.items():
        conn = connect(stack, servers, server, server)
        r = stack.call("POST", f"/api/connections/{conn['id']}/test")
        assert r.status == 200, r.body
        if code is None:
            assert r.data["ok"] is True
            assert [t["name"] for t in r.data["tools"]] == ["lookup_price", "search_tickets"]
            assert r.data["tools"][0]["inputSchema"]["required"] == ["symbol"]
        else:
            assert r.data["ok"] is False and r.data["error"]["code"] == code, (server, r.data)
    down = stack.call("POST", "/api/connections", body={"name": "down", "url": "http://127.0.0.1:9/mcp"}).data
    r = stack.call("POST", f"/api/connections/{down['id']}/test")
    assert r.data["ok"] is False and r.data["error"]["code"] == "unreachable"
    # With its credentials the same server answers, and its tools are cached for the agents.
    conn = connect(stack, servers, "authed", "auth", authHeader={"value": SECRET})
    assert stack.call("POST", f"/api/connections/{conn['id']}/test").data["ok"] is True
    cached = stack.call("GET", f"/api/connections/{conn['id']}").data["tools"]
    assert [t["name"] for t in cached["tools"]] == ["lookup_price", "search_tickets"]


# --- tools in turns ----------------------------------------------------------------------------
def test_a_chat_turn_calls_an_mcp_tool_and_keeps_every_call_and_result(stack, servers):
    conn = connect(stack, servers, "market")
    agent = acting_agent(stack, conn)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    assert r.status == 200, r.body
    (call,) = r.data["toolCalls"]
    assert call["name"] == "mcp__market__lookup_price" and call["input"] == {"symbol": "BTC"}
    assert call["connection"] == "market" and call["tool"] == "lookup_price"
    assert "97250.5" in call["result"] and "isError" not in call
    assert call["durationMs"] >= 0 and call["bytes"] > 0
    assert "97250.5" in r.data["reply"]
    messages = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    uses = [b for m in messages for b in m["content"] if b.get("type") == "tool_use"]
    results = [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    assert [u["name"] for u in uses] == ["mcp__market__lookup_price"]
    assert results[0]["tool_use_id"] == uses[0]["id"] and "97250.5" in results[0]["content"]
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["toolCalls"][0]["connection"] == "market" and run["toolCalls"][0]["durationMs"] >= 0


def test_several_tool_uses_of_one_answer_run_and_all_come_back(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "market"))
    r = stack.say(agent["id"], "use lookup_price for ETH and use search_tickets with login")
    assert r.status == 200, r.body
    names = [c["name"] for c in r.data["toolCalls"]]
    assert names == ["mcp__market__lookup_price", "mcp__market__search_tickets"]
    assert "3412.75" in r.data["toolCalls"][0]["result"] and "ENG-104" in r.data["toolCalls"][1]["result"]
    messages = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    asked = [m for m in messages if m["role"] == "assistant" and sum(b["type"] == "tool_use" for b in m["content"]) == 2]
    assert len(asked) == 1  # both in one model answer


def test_the_allow_list_limits_the_tools_an_agent_sees(stack, servers):
    conn = connect(stack, servers, "market")
    agent = stack.agent(tools=[{"connectionId": conn["id"], "allow": ["search_tickets"]}])
    r = stack.say(agent["id"], "use lookup_price for BTC")
    assert r.data["toolCalls"] == []  # the model was never offered it


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("use slow with 5", "timeout"),
        ("use boom with nothing", "tool_error"),
        ("use huge with 3000000", "too_large"),
    ],
)
def test_a_failing_tool_is_an_error_result_and_the_turn_goes_on(stack, servers, message, code):
    conn = connect(stack, servers, "faulty", "faulty", timeoutSeconds=2)
    agent = acting_agent(stack, conn)
    r = stack.say(agent["id"], message)
    assert r.status == 200, r.body
    (call,) = r.data["toolCalls"]
    assert call["isError"] is True and call["error"] == code
    after = stack.say(agent["id"], "hello again")
    assert after.status == 200


def test_a_server_that_is_down_or_refuses_is_an_error_result(stack, servers):
    down = stack.call("POST", "/api/connections", body={"name": "down", "url": "http://127.0.0.1:9/mcp"}).data
    market = connect(stack, servers, "market")
    agent = acting_agent(stack, market, down)
    # The down server's tools cannot be listed: the turn runs with the tools it has.
    r = stack.say(agent["id"], "use lookup_price for SOL")
    assert r.status == 200 and "182.3" in r.data["toolCalls"][0]["result"]
    # Listed once, then the server goes away: the call fails readably.
    stack.call("PATCH", f"/api/connections/{market['id']}", body={"url": "http://127.0.0.1:9/mcp"})
    r = stack.say(agent["id"], "use lookup_price for BTC")
    assert r.status == 200
    (call,) = r.data["toolCalls"]
    assert call["isError"] is True and call["error"] == "unreachable" and "could not be reached" in call["result"]


def test_a_big_result_reaches_the_model_cut_and_is_kept_whole(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    r = stack.say(agent["id"], "use huge with 40000")
    (call,) = r.data["toolCalls"]
    assert call["truncated"] == 40000 and call["fullResultKept"] is True
    assert len(call["result"]) < 16_200 and "[cut: 16000 of 40000 characters" in call["result"]
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    use_id = run["toolCalls"][0]["toolUseId"]
    full = stack.call("GET", f"/api/runs/{run['id']}/tool-results/{use_id}")
    assert full.status == 200 and full.data["complete"] is True
    assert full.data["result"]["content"][0]["text"] == "x" * 40000
    assert stack.call("GET", f"/api/runs/{run['id']}/tool-results/{use_id}", user="bob").status == 404
    assert stack.call("GET", f"/api/runs/{run['id']}/tool-results/toolu_nope").status == 404


def test_the_tool_list_is_cached_and_a_refresh_sees_a_change(stack, servers):
    conn = connect(stack, servers, "faulty", "faulty")
    agent = acting_agent(stack, conn)
    assert stack.say(agent["id"], "use echo with hi").data["toolCalls"][0]["name"] == "mcp__faulty__echo"

    def fresh(text: str) -> dict[str, Any]:
        """A tool added after the list was cached."""
        return {"fresh": text}

    servers.faulty.add_tool(fresh)
    try:
        assert stack.say(agent["id"], "use fresh with x").data["toolCalls"] == []  # the cached list
        refreshed = stack.call("POST", f"/api/connections/{conn['id']}/refresh").data
        assert "fresh" in [t["name"] for t in refreshed["tools"]]
        call = stack.say(agent["id"], "use fresh with x").data["toolCalls"][0]
        assert call["name"] == "mcp__faulty__fresh" and not call.get("isError")
    finally:
        servers.faulty.remove_tool("fresh")
    # Removed on the server but still cached: the call fails readably, the turn goes on.
    r = stack.say(agent["id"], "use fresh with y")
    assert r.status == 200 and r.data["toolCalls"][0]["isError"] is True


def test_runs_use_the_agents_tools_too(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "market"), defaultPrompt="use lookup_price for ETH")
    run = stack.run_now(agent["id"])
    assert run["status"] == "succeeded", run
    assert [c["name"] for c in run["toolCalls"]] == ["mcp__market__lookup_price"]
    fired = stack.fire(agent["id"])
    assert fired is not None
    runs = stack.runs(agent["id"])
    assert all(r["toolCalls"] and r["toolCalls"][0]["connection"] == "market" for r in runs if r["status"] == "succeeded")


def test_deleting_a_connection_takes_it_out_of_every_agent(stack, servers):
    market, faulty = connect(stack, servers, "market"), connect(stack, servers, "faulty", "faulty")
    first = acting_agent(stack, market, faulty)
    second = acting_agent(stack, market)
    gone = stack.call("DELETE", f"/api/connections/{market['id']}").data
    assert gone["agentsChanged"] == 2
    assert stack.call("GET", f"/api/agents/{first['id']}").data["tools"] == [
        {"connectionId": faulty["id"], "allow": None, "requireApproval": None}
    ]
    assert stack.call("GET", f"/api/agents/{second['id']}").data["tools"] == []
    assert stack.say(second["id"], "use lookup_price for BTC").data["toolCalls"] == []


# --- untrusted output, secrets ---------------------------------------------------------------
def test_tool_output_never_becomes_memory(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"), agentMemory=True)
    r = stack.say(agent["id"], "use hostile with news. I prefer short answers.")
    assert r.status == 200 and INJECTION[:30] in r.data["toolCalls"][0]["result"]
    stack.functions["ExtractFunction"].invoke(_extract_event(stack))
    facts = stack.call("GET", "/api/me/facts").data["items"]
    memories = stack.call("GET", f"/api/agents/{agent['id']}/memories").data["items"]
    stored = json.dumps([facts, memories]).lower()
    assert "hunter2" not in stored and "buy now" not in stored and "password" not in stored
    assert "short answers" in stored  # the user's own words still are


def _extract_event(stack: Any) -> dict[str, Any]:
    url = stack.resources.queue_url("ExtractQueue")
    out = boto3.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": {},
            "eventSource": "aws:sqs",
        }
        for m in out.get("Messages", [])
    ]
    assert records
    return {"Records": records}


def test_the_auth_value_never_appears_in_a_response_log_export_transcript_or_row(moto_stack, servers, caplog):
    stack = moto_stack  # the emulator can scan the whole table
    caplog.set_level(logging.DEBUG)
    conn = connect(stack, servers, "authed", "auth", authHeader={"value": SECRET})
    agent = acting_agent(stack, conn)
    seen = [stack.call("POST", f"/api/connections/{conn['id']}/test").body]
    seen.append(stack.say(agent["id"], "use lookup_price for BTC").body)
    assert "97250.5" in json.dumps(seen[-1])
    seen.append(stack.call("PATCH", f"/api/connections/{conn['id']}", body={"authHeader": {"value": SECRET + "-2"}}).body)
    seen += [
        stack.call("GET", p).body
        for p in ("/api/connections", f"/api/connections/{conn['id']}", f"/api/agents/{agent['id']}/runs")
    ]
    seen.append(stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").body)
    seen.append(stack.call("GET", "/api/me/export").body)
    text = json.dumps(seen) + caplog.text + (stack.transcript_bytes("alice", agent["id"]) or b"").decode()
    rows = boto3.client("dynamodb").scan(TableName=stack.deps.settings.table_name)["Items"]
    text += json.dumps(rows, default=str)
    assert "good-token" not in text
    sealed = [r for r in rows if r["SK"]["S"].startswith("CONN#")]
    assert sealed and all("sealedAuth" in r for r in sealed)


def test_a_sealed_value_opens_only_for_its_own_tenant_and_connection(stack, servers):
    conn = connect(stack, servers, "authed", "auth", authHeader={"value": SECRET})
    t = tenant_key("alice")
    _, sealed = stack.deps.connections.get_with_secret(t, conn["id"])
    box = stack.deps.secret_box
    assert box.open(sealed, {"tenant": t, "connectionId": conn["id"]}) == SECRET
    for context in ({"tenant": tenant_key("bob"), "connectionId": conn["id"]}, {"tenant": t, "connectionId": "conn_other"}):
        with pytest.raises(Exception, match="InvalidCiphertext|SealedValueUnreadable"):
            box.open(sealed, context)


# --- egress (TL5) --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "http://tools.example.com/mcp",  # not https
        "https://169.254.169.254/mcp",  # instance metadata
        "https://10.0.0.8/mcp",
        "https://192.168.1.1/mcp",
        "https://127.0.0.1/mcp",
        "https://localhost/mcp",
        "https://[::1]/mcp",
        "https://[fd00:ec2::254]/mcp",
        "https://[::ffff:10.0.0.1]/mcp",
        "https://[fe80::1]/mcp",
        "https://0.0.0.0/mcp",
    ],
)
def test_in_aws_only_https_to_public_addresses_is_accepted(stack, url):
    stack.deps.settings = stack.deps.settings.model_copy(update={"tool_egress": "public"})
    r = stack.call("POST", "/api/connections", body={"name": "target", "url": url})
    assert r.status == 400 and r.error["code"] == "egress_refused", (url, r.body)
    assert stack.call("GET", "/api/connections").data["items"] == []


def test_server_tools_are_refused_with_bedrock(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"model_provider": "bedrock"})
    r = stack.call("POST", "/api/agents", body={"name": "Ada", "serverTools": ["web_search"]})
    assert r.status == 400 and r.error["code"] == "server_tools_unsupported" and "Bedrock" in r.error["message"]
