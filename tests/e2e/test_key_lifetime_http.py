"""MX6 over real HTTP: a key used in a loop from a thread while its account is deleted. Whatever
the loop wrote before the deletion goes with it, and nothing it sends after lands: each of its
later requests is 401 key_revoked, and the account stays empty."""

from __future__ import annotations

import json
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.e2e.test_local_stack_http import http
from tests.e2e.test_mcp_server_http import _key


@pytest.fixture(scope="module")
def url(live):
    return live.url.rstrip("/")


def test_a_key_writing_in_a_loop_while_the_account_is_deleted_leaves_nothing(url):
    user = "loop-deleted"
    key = _key(url, user=user)
    answers: list[tuple[float, int, str]] = []
    stop = threading.Event()

    def loop() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            status, body = http(url, "POST", "/api/me/facts", user=None, body={"fact": f"I have {n} cats"},
                                headers={"authorization": f"Bearer {key}"})  # fmt: skip
            code = body.get("error", {}).get("code", "") if status >= 400 else ""
            answers.append((time.monotonic(), status, code))

    writer = threading.Thread(target=loop)
    writer.start()
    while sum(1 for _, s, _ in answers if s == 201) < 3:
        time.sleep(0.01)
    status, body = http(url, "DELETE", "/api/me", user=user)
    deleted_at = time.monotonic()
    assert status == 200 and body["data"]["deleted"]["facts"] >= 3
    # The loop goes on (its requests run beside the deletion's, in other execution environments)
    # until a few were sent after the deletion answered.
    waited_until = time.monotonic() + 60
    while sum(1 for t, _, _ in answers if t > deleted_at) < 5 and time.monotonic() < waited_until:
        time.sleep(0.01)
    stop.set()
    writer.join(timeout=60)
    after = [(s, c) for t, s, c in answers if t > deleted_at]
    assert after and all(a == (401, "key_revoked") for a in after), after
    assert {s for _, s, _ in answers} <= {201, 401}
    _, facts = http(url, "GET", "/api/me/facts", user=user)
    assert facts["data"]["items"] == []
    _, exported = http(url, "GET", "/api/me/export", user=user)
    assert exported["data"]["facts"] == [] and exported["data"]["apiKeys"] == []


def _socket_with_key(url: str, key: str) -> ClientConnection:
    status, body = http(url, "POST", "/api/stream-tickets", user=None, headers={"authorization": f"Bearer {key}"})
    assert status == 201, body
    return connect(f"{body['data']['url']}/?ticket={body['data']['ticket']}", open_timeout=10)


def _closed(ws: ClientConnection) -> bool:
    """Whether the server closed the socket (within a few seconds: the close frame travels)."""
    try:
        while True:
            ws.recv(timeout=5)
    except ConnectionClosed:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("how", ["revoked", "account_deleted"])
def test_sockets_opened_with_a_key_close_when_it_dies(url, how):
    user = f"socket-{how}"
    status, created = http(url, "POST", "/api/me/api-keys", user=user, body={"name": "s", "scopes": ["read", "write"]})
    key, key_id = created["data"]["key"], created["data"]["id"]
    other = _key(url, user=user)  # another key of the same user: its socket stays open on revocation
    with _socket_with_key(url, key) as ws, _socket_with_key(url, other) as kept:
        ws.send(json.dumps({"action": "subscribe", "agentId": "agent_x", "sessionId": "s"}))
        assert json.loads(ws.recv(timeout=10))["type"] in ("subscribed", "error")
        if how == "revoked":
            assert http(url, "DELETE", f"/api/me/api-keys/{key_id}", user=user)[0] == 200
        else:
            assert http(url, "DELETE", "/api/me", user=user)[0] == 200
        assert _closed(ws)
        if how == "revoked":
            kept.send(json.dumps({"action": "subscribe", "agentId": "agent_x", "sessionId": "s"}))
            assert json.loads(kept.recv(timeout=10))["type"] in ("subscribed", "error")
        else:
            assert _closed(kept)
