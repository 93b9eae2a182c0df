"""MX6: a key stops on the next request after its revocation, its expiry or its account's
deletion, though API Gateway still holds the authorizer's answer (ReauthorizeEvery, 60 s), and a
create that races the deletion does not land."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from engram.api import http as api_http
from engram.apikeys import authorizer
from engram.apikeys.repository import ApiKeyRepository
from local.apigw import invoke_http
from tests.integration.test_api_keys import _create, _with_key, clock  # noqa: F401

# The emulated API Gateway's clock frozen: whatever the authorizer let in stays cached.
pytestmark = pytest.mark.usefixtures("clock")


def test_a_key_that_expires_while_cached_is_refused_at_its_expiry(stack, monkeypatch):
    expires = datetime.now(UTC) + timedelta(hours=1)
    key = _create(stack, expiresAt=expires.isoformat()).data["key"]
    assert _with_key(stack, key, "GET", "/api/agents").status == 200  # cached by the gateway from here
    monkeypatch.setattr(api_http, "time", SimpleNamespace(time=lambda: expires.timestamp() + 1))
    refused = _with_key(stack, key, "GET", "/api/agents")
    assert refused.status == 401 and refused.error["code"] == "key_revoked"


def test_the_accounts_deletion_stops_a_cached_key_at_once(stack):
    key = _create(stack).data["key"]
    assert _with_key(stack, key, "POST", "/api/me/facts", {"fact": "I like tea"}).status == 201
    assert stack.call("DELETE", "/api/me").status == 200
    for method, path, body in (("GET", "/api/me/facts", None), ("POST", "/api/me/facts", {"fact": "I like coffee"})):
        refused = _with_key(stack, key, method, path, body)
        assert refused.status == 401 and refused.error["code"] == "key_revoked", (method, path)
    assert stack.call("GET", "/api/me/facts").data["items"] == []


@pytest.mark.parametrize("path", ["/api/me/facts", "/api/agents", "/mcp"])
def test_a_create_racing_the_deletion_does_not_land(stack, monkeypatch, path):
    """The deletion commits between the key's check and the create: the create fails with the key
    (its transaction checks the key's row) and nothing of it is stored."""
    key = _create(stack).data["key"]
    # The last read of the key before the create: the REST routes' liveness read (the gateway
    # cached the authorizer's answer); /mcp's own authorization.
    check = "grant_and_failures" if path == "/mcp" else "alive"
    checked = getattr(ApiKeyRepository, check)

    def checked_then_deleted(self, *args):
        answer = checked(self, *args)
        monkeypatch.setattr(ApiKeyRepository, check, checked)
        assert stack.call("DELETE", "/api/me").status == 200  # the account goes now, mid-request
        return answer

    monkeypatch.setattr(ApiKeyRepository, check, checked_then_deleted)
    if path == "/mcp":
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"fact": "I like tea"}},
        }
        headers = {
            "authorization": f"Bearer {key}",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
        }
        answer = stack.call("POST", path, user=None, body=call, headers=headers)
        assert answer.status == 200 and answer.body["result"]["isError"] is True
        assert '"key_revoked"' in answer.body["result"]["content"][0]["text"]
    else:
        body = {"fact": "I like tea"} if path == "/api/me/facts" else {"name": "Ada", "persona": "You help."}
        refused = _with_key(stack, key, "POST", path, body)
        assert refused.status == 401 and refused.error["code"] == "key_revoked"
    assert stack.call("GET", "/api/me/facts").data["items"] == []
    assert stack.call("GET", "/api/agents").data["items"] == []


def test_a_source_failing_too_often_is_refused_for_the_rest_of_the_minute(stack, monkeypatch):
    minute_start = 1_900_000_020.0  # epoch seconds at the start of a minute
    now = [minute_start]
    monkeypatch.setattr(authorizer, "time", SimpleNamespace(time=lambda: now[0]))
    key = _create(stack).data["key"]

    def from_(source: str, token: str) -> int:
        status, _, _ = invoke_http(
            stack.functions, "GET", "/api/agents", headers={"authorization": f"Bearer {token}"}, source_ip=source
        )
        return status

    guesses = [f"egk_{i:043d}" for i in range(authorizer.FAILED_ATTEMPTS_PER_MINUTE)]
    assert all(from_("203.0.113.7", guess) == 401 for guess in guesses)
    assert from_("203.0.113.7", key) == 401  # the right key too, from that source, this minute
    assert from_("198.51.100.4", key) == 200  # another source is not held back
    now[0] += 60
    stack.functions._auth_cache.clear()
    assert from_("203.0.113.7", key) == 200  # the next minute


def test_a_later_request_does_not_check_an_earlier_callers_key(stack):
    """Invocations follow one another on one thread: a revoked key of an earlier request must not
    refuse the creates of the next one (another user's, by sign-in)."""
    key = _create(stack, user="erin").data["key"]
    assert _with_key(stack, key, "POST", "/api/me/facts", {"fact": "I like tea"}).status == 201
    assert stack.call("DELETE", "/api/me", user="erin").status == 200
    assert stack.call("POST", "/api/me/facts", user="finn", body={"fact": "I like coffee"}).status == 201
    agent = stack.agent(user="finn")
    # A key request on the chat function, then (same thread) a webhook there, which asks nobody's principal.
    other = _create(stack, user="gus").data
    chat = stack.agent(user="gus")
    sent = _with_key(stack, other["key"], "POST", f"/api/agents/{chat['id']}/sessions/dashboard/messages", {"message": "hi"})
    assert sent.status == 200, sent.body
    assert stack.call("DELETE", f"/api/me/api-keys/{other['id']}", user="gus").status == 200
    answer = stack.webhook(agent["id"], agent["webhookSecret"], {"message": "from the webhook"})
    assert answer.status == 202, answer.body
