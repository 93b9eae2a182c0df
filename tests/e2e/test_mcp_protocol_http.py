"""MX5 over real HTTP on the local stack: what the Streamable HTTP transport's rules ask of
Engram's MCP server (405 for GET and DELETE, Origin and Host checked, batches refused), tool
titles and annotations, the server's name and version, and every argument error worded as the
REST API's `{code, message, field}`."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from mcp import Client

from engram import __version__
from tests.e2e.test_local_stack_http import new_agent
from tests.e2e.test_mcp_server_http import READ, WRITE, _error, _key, session

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


def _raw(url: str, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None):
    """(status, headers, JSON body) of one request, whatever its status."""
    request = urllib.request.Request(url + path, data=body, method=method)
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"{}")


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405_allow_post(url, method):
    for auth in ({}, {"authorization": "Bearer dev-alice"}):
        status, headers, body = _raw(url, method, "/mcp", headers={**MCP_HEADERS, **auth})
        assert status == 405
        assert headers["Allow"] == "POST"
        assert body["error"]["data"]["code"] == "method_not_allowed"


def test_a_foreign_origin_is_403_and_the_own_or_none_passes(url):
    post = {**MCP_HEADERS, "authorization": f"Bearer {_key(url)}", "content-type": "application/json"}
    status, _, body = _raw(
        url, "POST", "/mcp", body=json.dumps(INIT).encode(), headers={**post, "origin": "https://evil.example"}
    )
    assert status == 403
    assert body["error"]["code"] == -32600 and body["error"]["data"] == {"code": "origin_not_allowed", "field": "Origin"}
    host = url.split("://", 1)[1]
    for origin in ({}, {"origin": f"http://{host}"}):
        status, _, body = _raw(url, "POST", "/mcp", body=json.dumps(INIT).encode(), headers={**post, **origin})
        assert status == 200, body
        assert body["result"]["serverInfo"]["name"] == "engram"


@pytest.mark.parametrize("path", ["/mcp", "/api/me/facts", "/api/health"])
def test_a_host_that_is_not_loopback_is_refused_locally(url, path):
    """A DNS-rebinding page sends its own name as Host: it reads nothing, token or not."""
    port = url.rsplit(":", 1)[1]
    method, body = ("POST", json.dumps(INIT).encode()) if path == "/mcp" else ("GET", None)
    token = _key(url) if path == "/mcp" else "dev-alice"
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "content-type": "application/json"}
    status, _, _ = _raw(url, method, path, body=body, headers={**headers, "host": f"rebind.example:{port}"})
    assert status == 421
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"engram.localhost:{port}"):
        status, _, _ = _raw(url, method, path, body=body, headers={**headers, "host": host})
        assert status == 200


def test_a_batch_is_refused_with_json_rpcs_invalid_request(url):
    headers = {**MCP_HEADERS, "authorization": f"Bearer {_key(url)}", "content-type": "application/json"}
    status, _, body = _raw(url, "POST", "/mcp", body=json.dumps([INIT, {**INIT, "id": 2}]).encode(), headers=headers)
    assert status == 400
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600 and body["error"]["data"]["code"] == "batch_not_supported"


@pytest.mark.parametrize("token", [None, "egk_" + "A" * 43, "not-a-token", "dev-alice"])
def test_every_401_says_where_to_sign_in(url, token):
    """MCP authorization (2025-11-25): the 401 names the RFC 9728 metadata, which names the issuer."""
    headers = {**MCP_HEADERS, "content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}
    status, answer_headers, body = _raw(url, "POST", "/mcp", body=json.dumps(INIT).encode(), headers=headers)
    assert status == 401 and body["error"]["data"] == {"code": "unauthorized", "field": "Authorization"}
    challenge = answer_headers["WWW-Authenticate"]
    metadata = f"{url}/.well-known/oauth-protected-resource/mcp"
    assert challenge.startswith(f'Bearer resource_metadata="{metadata}"')
    _, _, document = _raw(url, "GET", "/.well-known/oauth-protected-resource/mcp")
    assert document["resource"] == f"{url}/mcp" and document["bearer_methods_supported"] == ["header"]


def test_server_name_version_titles_and_annotations(url):
    key = _key(url)

    async def steps(client: Client) -> Any:
        return client.server_info, await client.list_tools()

    init, listed = session(url, key, steps)
    assert init.name == "engram" and init.version == __version__
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == READ | WRITE
    for name, tool in tools.items():
        hints = tool.annotations
        assert tool.title and hints is not None and hints.title == tool.title, name
        assert hints.open_world_hint is False
        assert hints.read_only_hint is (name in READ), name
        assert tool.input_schema.get("additionalProperties") is False, name
    assert all(tools[n].annotations.idempotent_hint for n in READ)
    assert tools["forget"].annotations.destructive_hint and tools["forget_memory"].annotations.destructive_hint
    assert tools["forget"].annotations.idempotent_hint and tools["store_memory"].annotations.idempotent_hint
    assert tools["remember"].annotations.destructive_hint is False and not tools["remember"].annotations.idempotent_hint


def test_argument_errors_name_the_field_in_words(url):
    agent = new_agent(url)
    key = _key(url)

    async def steps(client: Client) -> dict[str, Any]:
        return {
            "unknown": await client.call_tool("list_facts", {"limt": 5}),
            "wrong_type": await client.call_tool("list_facts", {"limit": "many"}),
            "too_big": await client.call_tool("list_facts", {"limit": 100000}),
            "missing": await client.call_tool("search_memory", {"agentId": agent["id"]}),
            "bad_choice": await client.call_tool("recall_memory", {"scope": "galaxy", "ownerId": agent["id"]}),
            "no_tool": await client.call_tool("teleport", {}),
            "own_rule": await client.call_tool(
                "store_memory", {"scope": "agent", "ownerId": agent["id"], "key": "", "value": "v"}
            ),
        }

    out = session(url, key, steps)
    expected = {
        "unknown": ("validation_error", "limt", "limt is not a known field"),
        "wrong_type": ("validation_error", "limit", "limit must be a whole number"),
        "too_big": ("validation_error", "limit", "limit must be at most "),
        "missing": ("validation_error", "query", "query is required"),
        "bad_choice": ("validation_error", "scope", "scope must be one of "),
        "no_tool": ("unknown_tool", "name", "there is no tool 'teleport'"),
        "own_rule": ("bad_request", "key", "key must be at least 1 character"),  # the use case's own check, as REST words it
    }
    for case, (code, field, words) in expected.items():
        assert out[case].is_error, case
        text = out[case].content[0].text
        error = json.loads(text)  # the whole text is the error: no SDK prefix, no pydantic dump
        assert error == _error(out[case])
        assert (error["code"], error["field"]) == (code, field), (case, error)
        assert error["message"].startswith(words), (case, error)
