"""API Gateway's limits on the local WebSocket API (ST6), over real sockets: a binary frame closes
the socket with 1003, a client frame over 32 KB with 1009, an idle socket and one past its
lifetime close with 1001 (both limits shortened here; 10 minutes and 2 hours by default)."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed

from tests.e2e.test_local_stack_http import new_agent
from tests.e2e.test_stream_local import open_socket


@pytest.fixture(scope="module")
def stack_url(live):
    return live.url.rstrip("/")


def closed_with(ws, timeout: float = 30) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=timeout)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


def test_a_binary_frame_closes_the_socket_with_1003(stack_url):
    with open_socket(stack_url) as ws:
        ws.send(b'{"action": "subscribe"}')
        assert closed_with(ws) == 1003


def test_a_frame_over_32_kb_closes_the_socket_with_1009_and_one_under_is_answered(stack_url):
    agent = new_agent(stack_url)
    frame = {"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard", "pad": "x" * 30_000}
    with open_socket(stack_url) as ws:
        ws.send(json.dumps(frame))
        assert json.loads(ws.recv(timeout=10))["error"]["field"] == "pad"  # under the limit: the handler answers
        ws.send(json.dumps({**frame, "pad": "é" * 17_000}))  # 34 KB of UTF-8
        assert closed_with(ws) == 1009


def test_idle_and_old_sockets_close_as_api_gateway_closes_them(live, stack_url):
    sockets = live.sockets
    idle, lifetime = sockets.idle_s, sockets.lifetime_s
    try:
        sockets.idle_s = 1.0
        with open_socket(stack_url) as ws:
            assert closed_with(ws) == 1001
        sockets.idle_s, sockets.lifetime_s = idle, 2.0
        agent = new_agent(stack_url)
        with open_socket(stack_url) as ws:
            frame = json.dumps({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})
            ws.send(frame)  # busy all along: the lifetime ends it all the same
            assert json.loads(ws.recv(timeout=10))["type"] == "subscribed"
            assert closed_with(ws) == 1001
    finally:
        sockets.idle_s, sockets.lifetime_s = idle, lifetime
