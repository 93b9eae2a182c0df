"""The Python client's HTTP behaviour on a mocked transport (httpx2.MockTransport): 429 and 503
are sent again with exponential backoff that honours Retry-After, errors become the exception of
their status carrying the envelope's code, message and field, the key goes in the Authorization
header; and the `engram` command's config file (XDG_CONFIG_HOME, 0600, the environment first)."""

from __future__ import annotations

import json
import os
import stat

import httpx2
import pytest

from engram_client import config
from engram_client.client import Client, retry_after_seconds
from engram_client.errors import (
    ClientError,
    ConflictError,
    NotFoundError,
    RateLimitError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
)


def envelope(data=None, error=None) -> bytes:
    return json.dumps({"success": error is None, **({"data": data} if error is None else {"error": error})}).encode()


def scripted(*answers):
    """A transport answering each request with the next of `answers` (status, body, headers), recording the requests."""
    seen: list[httpx2.Request] = []
    queue = list(answers)

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body, headers = answer
        return httpx2.Response(status, content=body, headers={"content-type": "application/json", **headers})

    return httpx2.MockTransport(handler), seen


def client_with(transport, sleeps: list[float], **kwargs) -> Client:
    return Client("http://engram.test", "egk_test", transport=transport, sleep=sleeps.append, **kwargs)


AGENTS = envelope({"items": [{"id": "ag_1", "name": "Scout"}], "nextToken": None})


def test_a_429_is_sent_again_after_what_retry_after_asks():
    transport, seen = scripted((429, b'{"message":"Too Many Requests"}', {"Retry-After": "3"}), (200, AGENTS, {}))
    sleeps: list[float] = []
    page = client_with(transport, sleeps).list_agents()
    assert page["items"][0]["name"] == "Scout"
    assert len(seen) == 2 and sleeps == [3.0]
    assert all(r.headers["authorization"] == "Bearer egk_test" for r in seen)


def test_503_backs_off_exponentially_then_raises_with_the_envelopes_code():
    busy = (503, envelope(error={"code": "storage_unavailable", "message": "try again"}), {})
    transport, seen = scripted(busy, busy, busy, busy)
    sleeps: list[float] = []
    with pytest.raises(ServiceUnavailableError) as raised:
        client_with(transport, sleeps, retries=3, backoff=1.0).create_agent(name="Scout")
    assert len(seen) == 4  # the first try and three more
    assert raised.value.code == "storage_unavailable" and raised.value.status == 503 and raised.value.message == "try again"
    assert isinstance(raised.value, ServerError)
    # backoff * 2**attempt with jitter in [0.5, 1]: each wait longer than the one before can be shorter
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0 and 2.0 <= sleeps[2] <= 4.0
    assert all(json.loads(r.content) == {"name": "Scout"} for r in seen)


def test_a_429_that_outlasts_the_retries_is_a_rate_limit_error():
    limited = (429, b'{"message":"Too Many Requests"}', {})
    transport, _ = scripted(limited, limited)
    with pytest.raises(RateLimitError) as raised:
        client_with(transport, [], retries=1).list_agents()
    assert raised.value.code == "too_many_requests" and isinstance(raised.value, ClientError)


def test_other_errors_are_raised_at_once_as_their_status_class():
    conflict = envelope(error={"code": "quota_exceeded", "message": "at most 50 agents", "field": "agents"})
    transport, seen = scripted((409, conflict, {}))
    with pytest.raises(ConflictError) as raised:
        client_with(transport, []).create_agent(name="One too many")
    assert len(seen) == 1
    assert (raised.value.code, raised.value.field, raised.value.message) == ("quota_exceeded", "agents", "at most 50 agents")
    assert str(raised.value) == "409 quota_exceeded: at most 50 agents (field agents)"


def test_api_gateways_own_not_found_is_a_not_found_error():
    transport, _ = scripted((404, b'{"message":"Not Found"}', {}))
    with pytest.raises(NotFoundError) as raised:
        client_with(transport, []).get_agent("ag_1")
    assert raised.value.code == "route_not_found"


def test_a_connection_that_cannot_be_made_is_tried_again_then_reported():
    refused = httpx2.ConnectError("connection refused")
    transport, seen = scripted(refused, refused, (200, AGENTS, {}))
    sleeps: list[float] = []
    assert client_with(transport, sleeps).list_agents()["items"]
    assert len(seen) == 3 and len(sleeps) == 2
    transport, _ = scripted(refused, refused)
    with pytest.raises(TransportError) as raised:
        client_with(transport, [], retries=1).list_agents()
    assert raised.value.code == "connect_error"


def test_a_timeout_is_a_transport_error_and_is_not_sent_again():
    transport, seen = scripted(httpx2.ReadTimeout("slow"))
    with pytest.raises(TransportError) as raised:
        client_with(transport, [], timeout=2).send_message("ag_1", "dashboard", "hi")
    assert raised.value.code == "timeout" and len(seen) == 1  # a turn may have run: never sent twice


def test_paging_follows_next_token_with_the_same_filters():
    first = envelope({"items": [{"id": "f1"}, {"id": "f2"}], "nextToken": "t2"})
    last = envelope({"items": [{"id": "f3"}], "nextToken": None})
    transport, seen = scripted((200, first, {}), (200, last, {}))
    ids = [f["id"] for f in client_with(transport, []).iter_facts(include_archived=True, limit=2)]
    assert ids == ["f1", "f2", "f3"]
    assert [dict(r.url.params) for r in seen] == [
        {"includeArchived": "true", "limit": "2"},
        {"includeArchived": "true", "limit": "2", "nextToken": "t2"},
    ]


def test_retry_after_as_seconds_or_an_http_date():
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("Thu, 26 Nov 2026 10:00:30 GMT", now=1795687200.0) == 30.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_login_config_is_written_0600_under_xdg_config_home_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(config.ENV_URL, raising=False)
    monkeypatch.delenv(config.ENV_KEY, raising=False)
    path = config.write_config("http://127.0.0.1:3000/", "egk_stored")
    assert path == tmp_path / "engram" / "config.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert config.resolve()[:2] == ("http://127.0.0.1:3000", "egk_stored")
    monkeypatch.setenv(config.ENV_KEY, "egk_from_env")
    assert config.resolve()[:2] == ("http://127.0.0.1:3000", "egk_from_env")
    monkeypatch.setenv(config.ENV_URL, "https://engram.example.com")
    assert config.resolve()[:3] == ("https://engram.example.com", "egk_from_env", "environment")


def test_an_older_wider_config_file_is_narrowed_to_0600(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "engram" / "config.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.chmod(0o644)
    config.write_config("http://127.0.0.1:3000", "dev-alice")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_without_xdg_config_home_the_file_is_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.config_path() == tmp_path / ".config" / "engram" / "config.json"


def test_chat_without_a_socket_sends_the_turn_over_http(monkeypatch):
    """The ticket names a socket nobody listens on: the chat says so once and the reply comes whole."""
    import argparse
    import socket

    from engram_client import cli

    with socket.socket() as probe:  # a loopback port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    agent = {"id": "ag_1", "name": "Scout"}
    turn = {"runId": "run_1", "sessionId": "dashboard", "reply": "Hello!", "usage": {}, "toolCalls": [{"name": "remember"}]}

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/api/stream-tickets":
            data = {"ticket": "t", "expiresAt": 0, "url": f"ws://127.0.0.1:{closed}"}
        elif request.url.path.endswith("/messages"):
            sent = json.loads(request.content)  # named, so a retried 503 gets the first outcome
            assert sent["message"] == "hi" and sent["clientTurnId"].startswith("py-") and len(sent) == 2
            data = turn
        else:
            data = agent
        return httpx2.Response(200, json={"success": True, "data": data})

    monkeypatch.setattr(cli, "_client", lambda args: Client("http://engram.test", "k", transport=httpx2.MockTransport(handler)))
    shown: list[str] = []
    chat = cli._Chat(argparse.Namespace(agent="ag_1", session="dashboard", timeout=5), shown.append)
    chat.send("hi")
    chat.send("hi")
    text = "".join(shown)
    assert text.count("(no live stream:") == 1 and "connect_error" in text
    assert text.endswith("  [tool] remember done\nScout> Hello!\n")
    chat.close()
