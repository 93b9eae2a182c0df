"""The connections repository and the KMS secret box on the fakes and on moto alike: rows, the
quota, paging, the cached tool lists, and auth values that open only with their own context."""

from __future__ import annotations

import time

import pytest

from engram.aws.kms import SealedValueUnreadable
from engram.connections.models import Connection, DiscoveredTool, HealthError, ToolList, secret_context, utc_now
from engram.kernel.errors import NotFound, QuotaExceeded
from engram.kernel.ids import tenant_key
from engram.wiring.stores import Stores

T, OTHER = tenant_key("alice"), tenant_key("bob")


@pytest.fixture
def stores(backend) -> Stores:
    return backend.stores  # type: ignore[no-any-return]


def _connection(connection_id: str, name: str) -> Connection:
    now = "2026-01-01T00:00:00.000Z"
    return Connection(id=connection_id, created_at=now, updated_at=now, name=name, url="https://tools.example.com/mcp")


def test_connections_round_trip_page_and_stay_in_their_tenant(stores):
    for i in range(3):
        stores.connections.create(T, _connection(f"conn_{i}", f"server-{i}"), f"sealed-{i}", limit=10)
    stores.connections.create(OTHER, _connection("conn_9", "theirs"), None, limit=10)
    first, token = stores.connections.page(T, limit=2, token=None)
    second, end = stores.connections.page(T, limit=2, token=token)
    assert [c.id for c in first + second] == ["conn_0", "conn_1", "conn_2"] and end is None
    assert stores.connections.get_with_secret(T, "conn_1")[1] == "sealed-1"
    assert stores.connections.get(T, "conn_9") is None
    found = stores.connections.get_many_with_secrets(T, ["conn_2", "conn_9", "conn_0"])
    assert sorted(found) == ["conn_0", "conn_2"]
    assert stores.connections.name_taken(T, "server-1") and not stores.connections.name_taken(T, "theirs")


def test_the_connection_quota_holds_and_a_delete_frees_room(stores):
    stores.connections.create(T, _connection("conn_a", "a"), None, limit=2)
    stores.connections.create(T, _connection("conn_b", "b"), None, limit=2)
    with pytest.raises(QuotaExceeded):
        stores.connections.create(T, _connection("conn_c", "c"), None, limit=2)
    stores.connections.delete(T, "conn_a")
    stores.connections.create(T, _connection("conn_c", "c"), None, limit=2)
    with pytest.raises(NotFound):
        stores.connections.delete(T, "conn_a")


def test_updates_replace_and_remove_the_sealed_value(stores):
    stores.connections.create(T, _connection("conn_a", "a"), "old", limit=10)
    changed = stores.connections.update(T, "conn_a", {"sealedAuth": "new", "hasAuth": True, "authHeaderName": "X-Key"})
    assert changed.has_auth and changed.auth_header_name == "X-Key"
    assert stores.connections.get_with_secret(T, "conn_a")[1] == "new"
    stores.connections.update(T, "conn_a", {"sealedAuth": None, "hasAuth": False})
    assert stores.connections.get_with_secret(T, "conn_a")[1] is None
    with pytest.raises(NotFound):
        stores.connections.update(T, "conn_nope", {"name": "x"})


def test_tool_lists_are_cached_with_their_schemas_as_given(stores):
    stores.connections.create(T, _connection("conn_a", "a"), None, limit=10)
    schema = {"type": "object", "properties": {"ratio": {"type": "number", "minimum": 0.25}}, "required": ["ratio"]}
    listed = ToolList(tools=[DiscoveredTool(name="scale", input_schema=schema)], listed_at="t", expires_at=int(time.time()) + 60)
    stores.connections.put_tools(T, "conn_a", listed)
    got = stores.connections.tools(T, ["conn_a", "conn_b"])
    assert list(got) == ["conn_a"] and got["conn_a"].tools[0].input_schema == schema  # 0.25 stays a float
    assert stores.connections.tools(OTHER, ["conn_a"]) == {}
    stores.connections.delete(T, "conn_a")
    assert stores.connections.tools(T, ["conn_a"]) == {}


def test_a_sealed_value_opens_only_with_its_own_context(stores):
    box = stores.secret_box
    sealed = box.seal("Bearer s3cret", secret_context(T, "conn_a"))
    assert "s3cret" not in sealed
    assert box.open(sealed, secret_context(T, "conn_a")) == "Bearer s3cret"
    for context in (secret_context(OTHER, "conn_a"), secret_context(T, "conn_b")):
        with pytest.raises(SealedValueUnreadable):
            box.open(sealed, context)


def test_health_is_written_only_on_the_failure_count_the_writer_read(stores):
    stores.connections.create(T, _connection("conn_h", "flaky"), "sealed", limit=10)
    fresh = stores.connections.get(T, "conn_h")
    assert fresh.health.state == "unknown"
    error = HealthError(code="unreachable", message="the tool server could not be reached")
    once = fresh.health.failed(error, utc_now())
    assert stores.connections.record_health(T, "conn_h", once, seen=0) is True
    # A second turn that read the row before the first wrote: its write is refused, the first stands.
    assert stores.connections.record_health(T, "conn_h", once.failed(error, utc_now()), seen=0) is False
    stored = stores.connections.get(T, "conn_h").health
    assert stored.state == "degraded" and stored.consecutive_failures == 1 and stored.last_error == error
    twice = stored.failed(error, utc_now())
    assert stores.connections.record_health(T, "conn_h", twice, seen=1) is True
    down = stores.connections.get_with_secret(T, "conn_h")[0].health
    assert down.state == "down" and down.retry_after is not None and down.cooling(down.last_error_at or "")
    # A change of the connection keeps it; a success resets the count and keeps the last error.
    assert stores.connections.update(T, "conn_h", {"description": "x"}).health == down
    assert stores.connections.record_health(T, "conn_h", down.succeeded(utc_now()), seen=2) is True
    healed = stores.connections.get_many_with_secrets(T, ["conn_h"])["conn_h"][0].health
    assert healed.state == "healthy" and healed.consecutive_failures == 0 and healed.last_error == error
    # Another tenant's row, or a deleted one, is never created by a health write.
    assert stores.connections.record_health(OTHER, "conn_h", once, seen=0) is False
    stores.connections.delete(T, "conn_h")
    assert stores.connections.record_health(T, "conn_h", once, seen=0) is False
    assert stores.connections.get(T, "conn_h") is None


def test_an_oauth_state_is_taken_once_and_a_grant_is_replaced_only_over_the_one_read(stores):
    state = "ab" * 32
    stores.oauth_states.put(state, {"tenant": T, "connectionId": "conn_a", "verifier": "v"}, expires_at=2_000_000_000)
    taken = stores.oauth_states.take(state)
    assert taken is not None and taken["connectionId"] == "conn_a" and int(taken["expiresAt"]) == 2_000_000_000
    assert stores.oauth_states.take(state) is None  # one-time

    stores.connections.create(T, _connection("conn_a", "a"), None, limit=10, extra={"oauthClientId": "client-1"})
    status = {"status": "authorized", "scope": "tools"}
    assert stores.connections.replace_tokens(T, "conn_a", expected=None, sealed="grant-1", oauth=status)
    assert not stores.connections.replace_tokens(T, "conn_a", expected=None, sealed="grant-x", oauth=status)
    assert not stores.connections.replace_tokens(T, "conn_a", expected="grant-0", sealed="grant-x", oauth=status)
    assert stores.connections.replace_tokens(T, "conn_a", expected="grant-1", sealed="grant-2", oauth=status)
    row = stores.connections.oauth_row(T, "conn_a")
    assert row.sealed_tokens == "grant-2" and row.preregistered_client_id == "client-1"
    assert row.connection.oauth is not None and row.connection.oauth.status == "authorized"

    # One refresh lease at a time; a lapsed one is taken over; a release or a new grant frees it.
    assert stores.connections.claim_refresh(T, "conn_a", until=110, now=100)
    assert not stores.connections.claim_refresh(T, "conn_a", until=115, now=105)
    assert stores.connections.claim_refresh(T, "conn_a", until=125, now=111)
    stores.connections.release_refresh(T, "conn_a")
    assert stores.connections.claim_refresh(T, "conn_a", until=135, now=125)
    assert stores.connections.replace_tokens(
        T, "conn_a", expected="grant-2", sealed=None, oauth={"status": "needs_authorization"}
    )
    assert stores.connections.claim_refresh(T, "conn_a", until=145, now=126)
    assert not stores.connections.claim_refresh(T, "conn_missing", until=145, now=126)
