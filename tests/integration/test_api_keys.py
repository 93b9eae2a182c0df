"""Personal API keys (MX2) through the emulated API and the template's Lambda authorizer: shown
once, stored as a hash only, scoped, expiring, revocable within the authorizer's cache TTL,
bounded per user, gone with the account."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from engram.apikeys import authorizer
from tests.integration.conftest import Reply, Stack


def _create(stack: Stack, user: str = "alice", **body: Any) -> Reply:
    return stack.call("POST", "/api/me/api-keys", user=user, body={"name": "laptop", **body})


def _with_key(stack: Stack, key: str, method: str, path: str, body: Any = None) -> Reply:
    return stack.call(method, path, user=None, body=body, headers={"authorization": f"Bearer {key}"})


@pytest.fixture
def clock(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The emulated API Gateway's clock (its authorizer cache), moved by the test; a fresh cache."""
    now = [1_000_000.0]
    monkeypatch.setattr(stack.functions, "clock", lambda: now[0])
    monkeypatch.setattr(stack.functions, "_auth_cache", {})
    return now


def test_a_key_is_shown_once_and_acts_as_its_owner(stack, clock):
    agent = stack.agent()
    created = _create(stack)
    assert created.status == 201
    key = created.data["key"]
    assert key.startswith("egk_") and len(key) == 47
    assert created.data["scopes"] == ["read", "write"] and created.data["hint"] == key[:8]
    listed = stack.call("GET", "/api/me/api-keys").data["items"]
    assert [k["id"] for k in listed] == [created.data["id"]]
    assert "key" not in listed[0] and "keyHash" not in listed[0] and listed[0]["lastUsedAt"] is None

    seen = _with_key(stack, key, "GET", "/api/agents")
    assert seen.status == 200 and [a["id"] for a in seen.data["items"]] == [agent["id"]]
    assert _with_key(stack, key, "POST", "/api/agents", {"name": "Made by a key"}).status == 201
    assert stack.call("GET", "/api/me/api-keys").data["items"][0]["lastUsedAt"] is not None
    # Bob's key does not see Alice's agents.
    bobs = _create(stack, user="bob").data["key"]
    assert _with_key(stack, bobs, "GET", "/api/agents").data["items"] == []
    assert _with_key(stack, bobs, "GET", f"/api/agents/{agent['id']}").status == 404


def test_only_the_hash_is_stored(moto_stack):
    key = _create(moto_stack).data["key"]
    items = boto3.client("dynamodb").scan(TableName=moto_stack.deps.settings.table_name)["Items"]
    text = json.dumps(items)
    assert key not in text and key[8:] not in text
    assert hashlib.sha256(key.encode()).hexdigest() in text


def test_a_read_only_key_reads_and_is_refused_writes(stack, clock):
    key = _create(stack, scopes=["read"]).data["key"]
    assert _with_key(stack, key, "GET", "/api/agents").status == 200
    refused = _with_key(stack, key, "POST", "/api/agents", {"name": "Nope"})
    assert refused.status == 403 and refused.error["code"] == "insufficient_scope"
    assert stack.call("GET", "/api/agents").data["items"] == []


def test_a_key_cannot_manage_keys_or_erase_the_account(stack, clock):
    created = _create(stack).data
    key = created["key"]
    for method, path, body in (
        ("POST", "/api/me/api-keys", {"name": "another"}),
        ("GET", "/api/me/api-keys", None),
        ("DELETE", f"/api/me/api-keys/{created['id']}", None),
        ("DELETE", "/api/me", None),
    ):
        answer = _with_key(stack, key, method, path, body)
        assert answer.status == 403 and answer.error["code"] == "key_not_allowed"
    assert [k["id"] for k in stack.call("GET", "/api/me/api-keys").data["items"]] == [created["id"]]


def test_a_revoked_key_is_refused_on_the_next_request_though_the_authorizer_cached_it(stack, clock):
    created = _create(stack).data
    assert _with_key(stack, created["key"], "GET", "/api/agents").status == 200
    deleted = stack.call("DELETE", f"/api/me/api-keys/{created['id']}")
    assert deleted.status == 200 and stack.call("GET", "/api/me/api-keys").data["items"] == []
    # API Gateway keeps what the authorizer let in for its TTL (template.yaml: ReauthorizeEvery),
    # but the function reads the key's row on each request (MX6).
    assert stack.functions.authorizer_ttl == 60
    refused = _with_key(stack, created["key"], "GET", "/api/agents")
    assert refused.status == 401 and refused.error["code"] == "key_revoked"
    clock[0] += 61
    assert _with_key(stack, created["key"], "GET", "/api/agents").status == 401
    # A revocation is remembered for a day: a resend (its first answer lost) answers as the first did.
    assert stack.call("DELETE", f"/api/me/api-keys/{created['id']}").data == {"id": created["id"], "deleted": True}


def test_an_expired_key_or_an_unknown_one_is_refused(stack, clock, monkeypatch):
    expires = datetime.now(UTC) + timedelta(days=1)
    created = _create(stack, expiresAt=expires.isoformat())
    assert created.status == 201 and created.data["expiresAt"].startswith(expires.strftime("%Y-%m-%dT%H:%M"))
    key = created.data["key"]
    monkeypatch.setattr(authorizer, "time", SimpleNamespace(time=lambda: expires.timestamp() + 1))
    assert _with_key(stack, key, "GET", "/api/agents").status == 401
    assert _with_key(stack, "egk_" + "A" * 43, "GET", "/api/agents").status == 401
    assert _with_key(stack, key[:-1], "GET", "/api/agents").status == 401
    assert _with_key(stack, "not-a-jwt", "GET", "/api/agents").status == 401  # no issuer locally


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x", "scopes": ["admin"]}, "scopes.0"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"name": "x", "expiresAt": "2020-01-01T00:00:00Z"}, "expiresAt"),
        ({"name": "x", "expiresAt": "2999-01-01T00:00:00"}, "expiresAt"),
        ({"name": "x", "expiresAt": 4102444800}, "expiresAt"),  # a number, not the schema's ISO text
        ({"name": "x", "expiresAt": 4102444800.5}, "expiresAt"),
        ({"name": "x", "expiresAt": True}, "expiresAt"),
        ({"name": "x", "key": "egk_mine"}, "key"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(stack, body, field):
    answer = stack.call("POST", "/api/me/api-keys", body=body)
    assert answer.status == 400 and answer.error["field"] == field
    assert stack.call("GET", "/api/me/api-keys").data["items"] == []


def test_keys_are_bounded_per_user(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_api_keys": 2})
    first = _create(stack).data
    assert _create(stack).status == 201
    full = _create(stack)
    assert full.status == 409 and full.error["code"] == "quota_exceeded"
    assert _create(stack, user="bob").status == 201  # per user
    assert stack.call("DELETE", f"/api/me/api-keys/{first['id']}").status == 200
    assert _create(stack).status == 201


def test_another_users_key_cannot_be_revoked(stack, clock):
    created = _create(stack).data
    assert stack.call("DELETE", f"/api/me/api-keys/{created['id']}", user="bob").status == 404
    assert _with_key(stack, created["key"], "GET", "/api/agents").status == 200


def test_keys_are_exported_without_their_hash_and_deleted_with_the_account(stack, clock):
    created = _create(stack).data
    exported = stack.call("GET", "/api/me/export").data
    assert [k["id"] for k in exported["apiKeys"]] == [created["id"]]
    text = json.dumps(exported)
    assert created["key"] not in text and hashlib.sha256(created["key"].encode()).hexdigest() not in text
    gone = stack.call("DELETE", "/api/me")
    assert gone.status == 200 and gone.data["deleted"]["apiKeys"] == 1
    assert _with_key(stack, created["key"], "GET", "/api/agents").status == 401
    assert stack.call("GET", "/api/me/api-keys").data["items"] == []
