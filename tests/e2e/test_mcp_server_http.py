"""Engram's MCP server (MX1) over real HTTP on the local stack, driven by the official `mcp`
client over Streamable HTTP with an API key, as Claude Code or Claude Desktop would."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_local_stack_http import http, new_agent

READ = {"list_agents", "search_memory", "list_facts", "recall_memory", "get_decisions"}
WRITE = {"remember", "forget", "store_memory", "forget_memory"}


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


def _key(url: str, user: str = "alice", scopes: tuple[str, ...] = ("read", "write")) -> str:
    status, body = http(url, "POST", "/api/me/api-keys", user=user, body={"name": "mcp", "scopes": list(scopes)})
    assert status == 201, body
    return body["data"]["key"]


def session(url: str, key: str, steps: Any) -> Any:
    """Runs `steps(client)` in one client session against POST /mcp with the key, on a thread of
    its own (an earlier test of the session may leave an event loop set on the main thread)."""

    async def main() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http_client,
            Client(streamable_http_client(f"{url}/mcp", http_client=http_client), raise_exceptions=True) as client,
        ):
            return await steps(client)

    return on_own_thread(main)


def on_own_thread(main: Any) -> Any:
    """`anyio.run(main)` on a thread of its own, its result or its error on the caller's."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = anyio.run(main)
        except BaseException as err:  # re-raised on the test's thread
            out["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


def _error(result: Any) -> dict[str, Any]:
    """The REST error ({code, message, field?}) a tool error carries, after the SDK's
    "Error executing tool <name>: " prefix."""
    assert result.is_error
    text = result.content[0].text
    return json.loads(text[text.index("{") :])


def test_initialize_and_list_the_tools(url):
    key = _key(url)

    async def steps(client: Client) -> Any:
        return await client.list_tools()

    tools = session(url, key, steps).tools
    assert {t.name for t in tools} == READ | WRITE
    store = next(t for t in tools if t.name == "store_memory")
    assert set(store.input_schema["required"]) == {"scope", "ownerId", "key", "value"}


def test_each_tool_on_the_callers_own_data(url):
    agent = new_agent(url)
    key = _key(url)

    async def steps(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["agents"] = _data(await client.call_tool("list_agents", {}))
        out["remembered"] = _data(await client.call_tool("remember", {"fact": "I live in Lisbon", "topic": "home"}))
        out["facts"] = _data(await client.call_tool("list_facts", {}))
        out["stored"] = _data(
            await client.call_tool(
                "store_memory",
                {"scope": "agent", "ownerId": agent["id"], "key": "editor", "value": "prefers vim", "importance": 50},
            )
        )
        out["recalled"] = _data(
            await client.call_tool("recall_memory", {"scope": "agent", "ownerId": agent["id"], "query": "vim"})
        )
        out["listed"] = _data(await client.call_tool("recall_memory", {"scope": "agent", "ownerId": agent["id"]}))
        out["searched"] = _data(await client.call_tool("search_memory", {"agentId": agent["id"], "query": "lisbon"}))
        out["decisions"] = _data(await client.call_tool("get_decisions", {"agentId": agent["id"]}))
        out["forgot_memory"] = _data(
            await client.call_tool("forget_memory", {"scope": "agent", "ownerId": agent["id"], "memoryId": out["stored"]["id"]})
        )
        out["forgot"] = _data(await client.call_tool("forget", {"factId": out["remembered"]["id"]}))
        return out

    out = session(url, key, steps)
    assert agent["id"] in [a["id"] for a in out["agents"]["items"]]
    assert out["remembered"]["fact"] == "I live in Lisbon" and out["remembered"]["created"] is True
    assert [f["fact"] for f in out["facts"]["items"]] == ["I live in Lisbon"]
    assert out["stored"]["key"] == "editor" and out["stored"]["source"] == "manual"
    assert [m["key"] for m in out["recalled"]["items"]] == ["editor"]
    assert [m["key"] for m in out["listed"]["items"]] == ["editor"]
    assert out["searched"] == {"items": [], "nextToken": None}  # nothing said to the agent yet
    assert out["decisions"]["items"] == []
    assert out["forgot_memory"] == {"id": out["stored"]["id"], "deleted": True}
    assert out["forgot"]["archivedAt"]
    # The REST API sees what the tools did.
    _, memories = http(url, "GET", f"/api/agents/{agent['id']}/memories")
    assert memories["data"]["items"] == []
    _, facts = http(url, "GET", "/api/me/facts", body=None)
    assert facts["data"]["items"] == []


def test_errors_are_tool_errors_naming_the_code(url):
    agent = new_agent(url)
    key = _key(url)

    async def steps(client: Client) -> dict[str, Any]:
        return {
            "secret": await client.call_tool("remember", {"fact": "my password is Zebra-Hunter-9911!"}),
            "bad_scope": await client.call_tool(
                "store_memory", {"scope": "agent", "ownerId": agent["id"], "key": "", "value": "v"}
            ),
            "missing": await client.call_tool("forget", {"factId": "fact_nope"}),
            "bad_id": await client.call_tool("get_decisions", {"agentId": "no/such"}),
            "no_query": await client.call_tool("search_memory", {"agentId": agent["id"], "query": " "}),
        }

    out = session(url, key, steps)
    assert _error(out["secret"])["code"] == "secret_detected"
    assert _error(out["bad_scope"])["field"] == "key"
    assert _error(out["missing"])["code"] == "not_found"
    assert _error(out["bad_id"])["code"] == "invalid_id"
    assert _error(out["no_query"])["code"] == "missing_query"  # as GET .../archive/search answers

    async def unknown(client: Client) -> Any:
        return await client.call_tool("no_such_tool", {})

    refused = session(url, key, unknown)
    assert refused.is_error and "no_such_tool" in refused.content[0].text


def test_another_users_ids_are_refused(url):
    alices = new_agent(url, user="alice")
    bobs_key = _key(url, user="bob")

    async def steps(client: Client) -> list[Any]:
        return [
            await client.call_tool("recall_memory", {"scope": "agent", "ownerId": alices["id"]}),
            await client.call_tool("recall_memory", {"scope": "agent", "ownerId": alices["id"], "query": "x"}),
            await client.call_tool("store_memory", {"scope": "agent", "ownerId": alices["id"], "key": "k", "value": "v"}),
            await client.call_tool("search_memory", {"agentId": alices["id"], "query": "x"}),
            await client.call_tool("get_decisions", {"agentId": alices["id"]}),
        ]

    for result in session(url, bobs_key, steps):
        assert _error(result)["code"] == "not_found"
    _, memories = http(url, "GET", f"/api/agents/{alices['id']}/memories")
    assert memories["data"]["items"] == []


def test_a_workspaces_memories_are_recalled_by_query_for_its_owner_only(url):
    status, made = http(url, "POST", "/api/workspaces", body={"name": "Team"})
    assert status == 201, made
    workspace = made["data"]["id"]
    status, _ = http(url, "POST", f"/api/workspaces/{workspace}/memories", body={"key": "style", "value": "tabs over spaces"})
    assert status == 201

    async def steps(client: Client) -> Any:
        return await client.call_tool("recall_memory", {"scope": "workspace", "ownerId": workspace, "query": "tabs"})

    assert [m["key"] for m in _data(session(url, _key(url), steps))["items"]] == ["style"]
    assert _error(session(url, _key(url, user="bob"), steps))["code"] == "not_found"


def test_a_read_only_key_sees_and_calls_only_the_read_tools(url):
    key = _key(url, scopes=("read",))

    async def steps(client: Client) -> Any:
        listed = await client.list_tools()
        agents = await client.call_tool("list_agents", {})
        return listed, agents, await client.call_tool("remember", {"fact": "I like tea"})

    listed, agents, refused = session(url, key, steps)
    assert {t.name for t in listed.tools} == READ
    assert not agents.is_error
    assert refused.is_error and "remember" in refused.content[0].text  # no such tool for this key
    _, facts = http(url, "GET", "/api/me/facts")
    assert "I like tea" not in json.dumps(facts)


def test_without_a_valid_key_the_server_answers_401(url):
    async def steps(client: Client) -> Any:
        return await client.list_tools()

    bad = "egk_" + "A" * 43
    with pytest.raises(BaseException, match="errors in a TaskGroup|error response"):
        session(url, bad, steps)
    status, body = http(url, "POST", "/mcp", user=None, body={}, headers={"authorization": f"Bearer {bad}"})
    assert status == 401 and body["error"]["data"] == {"code": "unauthorized", "field": "Authorization"}


def test_concurrent_calls_of_several_users_are_each_answered_for_their_own_caller(url):
    """Requests served side by side (one kept event loop per container; a request that finds it
    busy gets one of its own): each answer is its own caller's, read-only keys stay read-only."""
    users = {f"racer{n}": _key(url, user=f"racer{n}", scopes=("read", "write") if n % 2 else ("read",)) for n in range(6)}
    for user in users:
        http(url, "POST", "/api/me/facts", user=user, body={"fact": f"I am {user}"})

    def calls(key: str) -> list[Any]:
        async def steps(client: Client) -> list[Any]:
            return [
                *[_data(await client.call_tool("list_facts", {})) for _ in range(5)],
                {t.name for t in (await client.list_tools()).tools},
            ]

        return session(url, key, steps)

    answers: dict[str, list[Any]] = {}
    threads = [threading.Thread(target=lambda u=user, k=key: answers.update({u: calls(k)})) for user, key in users.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.keys() == users.keys()
    for n, (user, got) in enumerate(sorted(answers.items())):
        *facts, tools = got
        assert all([f["fact"] for f in page["items"]] == [f"I am {user}"] for page in facts), (user, facts)
        assert tools == (READ | WRITE if n % 2 else READ)


def test_handshake_era_requests_of_two_users_in_turn_are_each_answered_for_their_own_caller(url):
    """A 2025 (initialize-era) client's requests take the SDK's other path (a server task in the
    session manager's task group, which outlives one request): each is still its own caller's."""
    keys = {user: _key(url, user=user) for user in ("turn-a", "turn-b")}
    for user in keys:
        http(url, "POST", "/api/me/facts", user=user, body={"fact": f"I am {user}"})
    era = {"mcp-protocol-version": "2025-06-18", "accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_facts", "arguments": {}}}
    with httpx2.Client(timeout=30) as client:
        for user in ["turn-a", "turn-b", "turn-a", "turn-b"]:
            headers = {**era, "authorization": f"Bearer {keys[user]}"}
            assert client.post(f"{url}/mcp", json=initialize, headers=headers).status_code == 200
            answer = client.post(f"{url}/mcp", json=call, headers=headers)
            assert answer.status_code == 200, answer.text
            items = answer.json()["result"]["structuredContent"]["items"]
            assert [f["fact"] for f in items] == [f"I am {user}"]
