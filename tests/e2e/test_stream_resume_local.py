"""Long and dropped turns on the local stack with the Python client (ST5, ST6): a tool that runs
longer than the socket's idle limit (14 minutes against API Gateway's 10, here shortened to 5 s
against 2 s, with keepalives every 0.3 s) keeps its socket; a socket forced off during a tool is
opened again by the client, which resumes and yields every event once, in order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from engram_client import Client
from local.stack import start_stack
from tests.e2e.test_local_stack_http import http
from tests.mcp_servers import McpServers


@pytest.fixture(scope="module")
def live() -> Iterator[Any]:
    before = os.environ.get("STREAM_KEEPALIVE_SECONDS")
    os.environ["STREAM_KEEPALIVE_SECONDS"] = "0.3"
    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        yield handle
    finally:
        handle.stop()
        if before is None:
            os.environ.pop("STREAM_KEEPALIVE_SECONDS", None)
        else:
            os.environ["STREAM_KEEPALIVE_SECONDS"] = before


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def tool_agent(url: str, servers: McpServers, name: str, user: str = "alice") -> str:
    """An agent of `user` with the faulty MCP server's tools (slow, huge, ...) as connection `name`."""
    body = {"name": name, "url": servers.url("faulty"), "timeoutSeconds": 60}
    status, conn = http(url, "POST", "/api/connections", user=user, body=body)
    assert status == 201, conn
    status, agent = http(
        url, "POST", "/api/agents", user=user, body={"name": "Builder", "tools": [{"connectionId": conn["data"]["id"]}]}
    )
    assert status == 201, agent
    return str(agent["data"]["id"])


def _client(url: str) -> Client:
    return Client(url, "dev-alice", timeout=60)


def test_a_tool_longer_than_the_idle_limit_keeps_its_socket(live, servers):
    url = live.url.rstrip("/")
    agent_id = tool_agent(url, servers, "long")
    idle = live.sockets.idle_s
    live.sockets.idle_s = 2.0
    try:
        with _client(url) as engram, engram.stream() as stream:
            events = list(stream.turn(agent_id, "dashboard", "use slow with 5", client_turn_id="long-tool"))
            frames_seen = stream.reconnects
    finally:
        live.sockets.idle_s = idle
    assert events[-1]["type"] == "turn.completed" and frames_seen == 0  # never idle: never closed, never reopened
    seqs = [e["seq"] for e in events[1:]]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_socket_forced_off_during_a_tool_is_reopened_and_the_turn_resumed(live, servers):
    url = live.url.rstrip("/")
    agent_id = tool_agent(url, servers, "dropped")
    events: list[dict[str, Any]] = []
    with _client(url) as engram, engram.stream() as stream:
        for event in stream.turn(agent_id, "dashboard", "use slow with 2", client_turn_id="dropped"):
            events.append(dict(event))
            if event["type"] == "tool.started" and stream.reconnects == 0:
                stream._ws.close()  # the network drops it
        reconnects = stream.reconnects
    assert reconnects == 1
    assert events[0]["type"] == "turn.queued" and events[-1]["type"] == "turn.completed"
    seqs = [e["seq"] for e in events[1:]]
    assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order
    types = [e["type"] for e in events]
    assert types.index("tool.started") < types.index("tool.finished")
