"""Chat turns through the real anthropic client with a mocked HTTP transport."""

from __future__ import annotations

import json

import httpx2

from engram.engine.pricing import WEB_SEARCH_USD, priced_usage
from engram.engine.providers.anthropic_provider import AnthropicProvider


def _message(content, stop="end_turn"):
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 1000,
            "output_tokens": 100,
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 500,
        },
    }


def _use(stack, handler):
    settings = stack.deps.settings.model_copy(
        update={"anthropic_api_key": "sk-test", "model_provider": "anthropic", "model_max_retries": 2}
    )
    stack.deps.provider_override = AnthropicProvider(settings, http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def test_turn_with_a_tool_call_through_the_sdk(stack):
    requests = []

    def handler(request):
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            return httpx2.Response(
                200,
                json=_message(
                    [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_current_time", "input": {}},
                    ],
                    stop="tool_use",
                ),
            )
        return httpx2.Response(200, json=_message([{"type": "text", "text": "It is noon."}]))

    _use(stack, handler)
    # Long enough for Sonnet 4.6's minimum cacheable prompt (2,048 tokens) with the tools.
    agent = stack.agent(persona="You are terse. " + "Answer in one line. " * 200, model="claude-sonnet-4-6")
    r = stack.say(agent["id"], "what time is it?")
    assert r.status == 200, r.body
    assert r.data["reply"] == "It is noon."
    assert r.data["toolCalls"][0]["name"] == "get_current_time"

    first, second = requests
    # system prompt rebuilt from the agent's config, with a cache breakpoint on the stable prefix
    assert "You are terse." in first["system"][0]["text"] and first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert {"get_current_time", "memory_store", "memory_recall", "memory_forget", "remember", "forget"} <= {
        t["name"] for t in first["tools"]
    }
    assert first["model"] == "claude-sonnet-4-6"
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "what time is it?", "cache_control": {"type": "ephemeral"}}]}
    ]
    # the second call carries the tool call and its result in the SDK's shapes
    assert second["messages"][1]["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "get_current_time", "input": {}}
    assert (
        second["messages"][2]["content"][0]["type"] == "tool_result"
        and second["messages"][2]["content"][0]["tool_use_id"] == "toolu_1"
    )

    # usage and cost from the price table: 2 calls of (1000 in, 100 out, 2000 cache read, 500 cache write)
    usage = r.data["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["cacheReadTokens"], usage["cacheWriteTokens"]) == (
        2000,
        200,
        4000,
        1000,
    )
    expected = 2 * (1000 * 3 + 100 * 15 + 2000 * 0.30 + 500 * 3.75) / 1_000_000
    assert abs(usage["costUsd"] - expected) < 1e-9

    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert len(stored) == 4 and all("cache_control" not in b for m in stored for b in m["content"])


def test_persona_changes_apply_on_the_next_turn_without_touching_history(stack):
    systems = []

    def handler(request):
        systems.append(json.loads(request.content)["system"][0]["text"])
        return httpx2.Response(200, json=_message([{"type": "text", "text": "ok"}]))

    _use(stack, handler)
    agent = stack.agent(persona="Speak French.")
    stack.say(agent["id"], "one")
    stack.call("PATCH", f"/api/agents/{agent['id']}", body={"persona": "Speak German."})
    stack.say(agent["id"], "two")
    assert "Speak French." in systems[0] and "Speak German." in systems[1] and "French" not in systems[1]
    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert all(m["role"] in ("user", "assistant") for m in stored) and len(stored) == 4  # no system prompt stored


def test_overloaded_then_ok_is_retried_within_the_turn(stack):
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            return httpx2.Response(
                529,
                json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                headers={"retry-after-ms": "1"},
            )
        return httpx2.Response(200, json=_message([{"type": "text", "text": "fine"}]))

    _use(stack, handler)
    agent = stack.agent()
    r = stack.say(agent["id"], "hi")
    assert r.status == 200 and r.data["reply"] == "fine" and len(calls) == 2


def test_failure_after_retries_leaves_history_unchanged_and_the_run_failed(stack):
    agent = stack.agent()
    assert stack.say(agent["id"], "hold on to this turn").status == 200  # offline first turn
    before = stack.transcript_bytes("alice", agent["id"])
    calls = []

    def handler(request):
        calls.append(1)
        return httpx2.Response(
            529,
            json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            headers={"retry-after-ms": "1"},
        )

    _use(stack, handler)
    r = stack.say(agent["id"], "this one fails")
    assert r.status == 502 and r.error["code"] == "model_error"
    assert len(calls) == 3  # one try and two retries
    assert stack.transcript_bytes("alice", agent["id"]) == before
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and "529" in run["error"]["message"]
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["messageCount"] == 2 and session["revision"] == 1


def test_server_tools_round_trip_intact_and_their_searches_are_billed(stack):
    """TL6: an agent with web_search gets Anthropic's server tool; a paused answer (pause_turn) is
    handed back and continued in one assistant message; the blocks are stored and sent back as they
    came on the next turn; each search costs $0.01 on top of the tokens."""
    requests = []
    search_use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x.com status"}}
    search_result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {"type": "web_search_result", "url": "https://x.com", "title": "X", "encrypted_content": "abc", "page_age": None}
        ],
    }

    def handler(request):
        body = json.loads(request.content)
        requests.append((body, dict(request.headers)))
        if len(requests) == 1:
            return httpx2.Response(200, json=_message([search_use, search_result], stop="pause_turn"))
        answer = _message([{"type": "text", "text": "x.com is up."}])
        answer["usage"]["server_tool_use"] = {"web_search_requests": 2}
        return httpx2.Response(200, json=answer)

    _use(stack, handler)
    agent = stack.agent(serverTools=["web_search", "web_fetch"])
    r = stack.say(agent["id"], "visit x.com")
    assert r.status == 200, r.body
    assert r.data["reply"] == "x.com is up."
    first, headers = requests[0]
    server = [t for t in first["tools"] if t.get("type", "").startswith(("web_search", "web_fetch"))]
    assert [t["name"] for t in server] == ["web_search", "web_fetch"]
    assert headers.get("anthropic-beta") == "web-fetch-2025-09-10"
    # The paused answer went back as the conversation's last (assistant) message.
    continued = requests[1][0]["messages"][-1]
    assert continued["role"] == "assistant" and continued["content"][0]["type"] == "server_tool_use"
    messages = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    kinds = [b["type"] for b in messages[1]["content"]]
    assert kinds == ["server_tool_use", "web_search_tool_result", "text"]
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    one_call = priced_usage(
        "claude-sonnet-4-6", input_tokens=1000, output_tokens=100, cache_read_tokens=2000, cache_write_tokens=500
    )
    assert abs(run["usage"]["costUsd"] - (2 * one_call.cost_usd + 2 * WEB_SEARCH_USD)) < 1e-6
    # The next turn sends the stored blocks back intact.
    again = stack.say(agent["id"], "and now?")
    assert again.status == 200, again.body
    replayed = requests[-1][0]["messages"][1]["content"]
    assert [b["type"] for b in replayed] == ["server_tool_use", "web_search_tool_result", "text"]
    assert replayed[1]["content"][0]["encrypted_content"] == "abc"
