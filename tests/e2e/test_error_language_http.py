"""One error language (issue 33): the same bad input sent on every surface of the local stack (the
HTTP API, the WebSocket, the signed webhook, the MCP server through the official client) is
answered with the same `{code, message, field, details}`, in words for a person, never pydantic's
own text."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from mcp import Client

from engram.conversations.webhooks import sign
from tests.e2e.test_local_stack_http import http, new_agent
from tests.e2e.test_mcp_server_http import _error, _key, session
from tests.e2e.test_stream_local import open_socket


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


@pytest.fixture(scope="module")
def agent(url):
    return new_agent(url)


def _over_http(url: str, agent: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    status, answer = http(url, "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body=body)
    assert status == 400, answer
    return answer["error"]


def _over_the_socket(url: str, agent: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    frame = {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "clientTurnId": "bad1", **body}
    with open_socket(url) as ws:
        ws.send(json.dumps(frame))
        answer = json.loads(ws.recv(timeout=30))
    assert answer["type"] == "error" and answer["clientTurnId"] == "bad1", answer
    return answer["error"]


def _over_the_webhook(url: str, agent: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    raw, ts = json.dumps(body), str(int(time.time()))
    headers = {"x-engram-timestamp": ts, "x-engram-signature": sign(agent["webhookSecret"], ts, raw)}
    status, answer = http(url, "POST", f"/api/agents/{agent['id']}/webhook", user=None, raw=raw.encode(), headers=headers)
    assert status == 400, answer
    return answer["error"]


BAD_MESSAGES = {
    "empty": ({"message": ""}, "message must not be empty"),
    "not text": ({"message": 5}, "message must be text"),
    "an unknown field": ({"message": "hi", "colour": "red"}, "colour is not a known field"),
}


@pytest.mark.parametrize("case", list(BAD_MESSAGES))
def test_a_bad_message_reads_the_same_over_http_the_socket_and_the_webhook(url, agent, case):
    body, words = BAD_MESSAGES[case]
    answers = {
        "http": _over_http(url, agent, body),
        "socket": _over_the_socket(url, agent, body),
        "webhook": _over_the_webhook(url, agent, body),
    }
    assert answers["http"]["code"] == "validation_error" and answers["http"]["message"] == words, answers
    assert answers["socket"] == answers["http"] == answers["webhook"], answers
    # Nothing was queued or run for any of them.
    status, runs = http(url, "GET", f"/api/agents/{agent['id']}/runs")
    assert status == 200 and runs["data"]["items"] == [], runs


def _over_mcp(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    key = _key(url)

    async def steps(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    return _error(session(url, key, steps))


@pytest.mark.parametrize(
    "tool, arguments, method, path, body, words",
    [
        # checked by the service the tool and the route call
        ("remember", {"fact": "ab"}, "POST", "/api/me/facts", {"fact": "ab"}, "fact must be at least 4 character(s)"),
        # checked by the SDK against the tool's signature before the tool runs
        ("remember", {"fact": 5}, "POST", "/api/me/facts", {"fact": 5}, "fact must be text"),
        (
            "remember",
            {"fact": "I like tea", "confidence": "maybe"},
            "POST",
            "/api/me/facts",
            {"fact": "I like tea", "confidence": "maybe"},
            "confidence must be one of 'asserted' or 'inferred'",
        ),
        ("list_agents", {"limit": 0}, "GET", "/api/agents?limit=0", None, "limit must be at least 1"),
        (
            "store_memory",
            {"scope": "agent", "ownerId": "{agent}", "key": "k", "value": "v", "importance": 101},
            "POST",
            "/api/agents/{agent}/memories",
            {"key": "k", "value": "v", "importance": 101},
            "importance must be at most 100",
        ),
    ],
)
def test_a_bad_tool_call_reads_as_the_rest_api_words_it(url, agent, tool, arguments, method, path, body, words):
    arguments = {k: v.replace("{agent}", agent["id"]) if isinstance(v, str) else v for k, v in arguments.items()}
    status, answer = http(url, method, path.replace("{agent}", agent["id"]), body=body)
    assert status == 400 and answer["error"]["message"] == words, answer
    tool_error = _over_mcp(url, tool, arguments)
    assert tool_error == answer["error"], (tool_error, answer["error"])
