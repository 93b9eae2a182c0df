"""MX5's conformance matrix: the clients people use, each the real package, against the local
stack's /mcp with an API key: the Python SDK 1.x client (its own venv), the 2.x client (Engram's
venv), the TypeScript SDK client 1.32.2 and mcp-remote 0.15.1 (npm, package-lock.json) driven over
stdio by the TypeScript client, as Claude Desktop runs it. Each connects, lists the tools with
their titles and annotations, writes a fact, reads it back, and gets argument errors as the REST
API words them; none reports a transport error (the TypeScript client logged "Failed to open SSE
stream: Not Found" on every connection while GET /mcp was 404)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from mcp import Client

from engram import __version__
from tests.e2e.test_mcp_server_http import READ, WRITE, _key, session
from tests.mcp_clients import node_clients, py1_python

CLIENTS = ("py1", "py2", "ts-sdk", "mcp-remote")


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


def _py2(url: str, key: str) -> dict[str, Any]:
    async def steps(client: Client) -> dict[str, Any]:
        def dump(result: Any) -> dict[str, Any]:
            return result.model_dump(by_alias=True, exclude_none=True)

        return {
            "serverInfo": client.server_info.model_dump(),
            "tools": [t.model_dump(by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools],
            "remember": dump(await client.call_tool("remember", {"fact": "I test with py2", "topic": "testing"})),
            "listFacts": dump(await client.call_tool("list_facts", {})),
            "badArgument": dump(await client.call_tool("list_facts", {"limit": "many"})),
            "unknownArgument": dump(await client.call_tool("list_facts", {"limt": 3})),
            "transportErrors": [],
        }

    return session(url, key, steps)


def _run(command: list[str], key: str, cwd: str | None = None) -> dict[str, Any]:
    env = {**os.environ, "ENGRAM_MCP_AUTH": f"Bearer {key}", "MCP_REMOTE_CONFIG_DIR": os.path.join(cwd or ".", ".mcp-auth")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    assert key not in " ".join(command)  # the key travels in the environment, not argv (ps)
    out = json.loads(done.stdout)
    out["stderr"] = done.stderr
    return out


def _client(name: str, url: str, key: str, tmp: str) -> dict[str, Any]:
    if name == "py2":
        return _py2(url, key)
    if name == "py1":
        return _run([str(py1_python()), str(node_clients().parent / "mcp_clients" / "py1_client.py"), f"{url}/mcp"], key)
    folder = node_clients()
    out = _run(["node", str(folder / "client.mjs"), name, f"{url}/mcp"], key, cwd=tmp)
    assert "error" not in out, out["error"]
    return out


def _rest_error(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("isError") is True, result
    return json.loads(result["content"][0]["text"])


@pytest.mark.parametrize("name", CLIENTS)
def test_each_client_works_as_documented(url, name, tmp_path):
    user = f"conf-{name}"
    key = _key(url, user=user)
    out = _client(name, url, key, str(tmp_path))

    assert out["serverInfo"]["name"] == "engram" and out["serverInfo"]["version"] == __version__
    assert out["transportErrors"] == [], out["transportErrors"]
    assert "Failed to open SSE stream" not in out.get("stderr", "")
    tools = {t["name"]: t for t in out["tools"]}
    assert set(tools) == READ | WRITE
    for tool_name, tool in tools.items():
        hints = tool["annotations"]
        assert tool["title"] and hints["title"] == tool["title"]
        assert hints["readOnlyHint"] is (tool_name in READ)
        assert tool["inputSchema"]["additionalProperties"] is False
    assert tools["forget"]["annotations"]["destructiveHint"] is True

    assert out["remember"].get("isError") is not True, out["remember"]
    listed = out["listFacts"]
    assert listed.get("isError") is not True
    assert [f["fact"] for f in listed["structuredContent"]["items"]] == [f"I test with {name}"]

    bad = _rest_error(out["badArgument"])
    assert bad == {
        "code": "validation_error",
        "message": "limit must be a whole number",
        "field": "limit",
        "details": [{"field": "limit", "message": "must be a whole number"}],
    }
    unknown = _rest_error(out["unknownArgument"])
    assert unknown == {
        "code": "validation_error",
        "message": "limt is not a known field",
        "field": "limt",
        "details": [{"field": "limt", "message": "is not a known field"}],
    }
