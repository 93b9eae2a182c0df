"""The API key repository on the fakes and on moto alike: the owner's rows and the authorizer's
lookup rows written and deleted together, the quota, paging, the last use written at most once
per interval, and the account's keys deleted first."""

from __future__ import annotations

import pytest

from engram.apikeys.models import ApiKey, KeyGrant, key_hash, new_key
from engram.kernel.errors import NotFound, QuotaExceeded
from engram.kernel.ids import tenant_key
from engram.wiring.stores import Stores

T, OTHER = tenant_key("alice"), tenant_key("bob")


@pytest.fixture
def stores(backend) -> Stores:
    return backend.stores  # type: ignore[no-any-return]


def _create(stores: Stores, t: str, key_id: str, *, limit: int = 10, expires: int | None = None) -> str:
    secret = new_key()
    now = "2026-01-01T00:00:00.000Z"
    key = ApiKey(id=key_id, created_at=now, updated_at=now, name=key_id, scopes=["read"], hint=secret[:8])
    grant = KeyGrant(sub="alice" if t == T else "bob", key_id=key_id, scopes=("read",), expires_at=expires)
    stores.api_keys.create(t, key, grant, key_hash(secret), limit=limit)
    return key_hash(secret)


def test_keys_round_trip_page_and_stay_in_their_tenant(stores):
    digests = [_create(stores, T, f"key_{i}", expires=2_000_000_000 if i == 0 else None) for i in range(3)]
    _create(stores, OTHER, "key_9")
    first, token = stores.api_keys.page(T, limit=2, token=None)
    second, end = stores.api_keys.page(T, limit=2, token=token)
    assert [k.id for k in first + second] == ["key_0", "key_1", "key_2"] and end is None
    assert all(k.last_used_at is None for k in first + second)
    grant = stores.api_keys.grant(digests[0])
    assert grant == KeyGrant(sub="alice", key_id="key_0", scopes=("read",), expires_at=2_000_000_000)
    assert stores.api_keys.grant("0" * 64) is None
    assert [k.id for k in stores.api_keys.all(OTHER)] == ["key_9"]


def test_last_use_is_written_at_most_once_per_interval(stores):
    digest = _create(stores, T, "key_a")
    stores.api_keys.touch(digest, 1_000, every=60)
    stores.api_keys.touch(digest, 1_030, every=60)  # within the minute: not written
    assert stores.api_keys.grant(digest).last_used_at == 1_000
    stores.api_keys.touch(digest, 1_061, every=60)
    assert stores.api_keys.grant(digest).last_used_at == 1_061
    assert stores.api_keys.all(T)[0].last_used_at == "1970-01-01T00:17:41Z"
    stores.api_keys.touch("f" * 64, 1_000, every=60)  # a key that is gone: nothing written
    assert stores.api_keys.grant("f" * 64) is None


def test_the_quota_holds_and_a_delete_removes_both_rows(stores):
    digest = _create(stores, T, "key_a", limit=2)
    _create(stores, T, "key_b", limit=2)
    with pytest.raises(QuotaExceeded):
        _create(stores, T, "key_c", limit=2)
    stores.api_keys.delete(T, "key_a")
    assert stores.api_keys.grant(digest) is None
    _create(stores, T, "key_c", limit=2)
    stores.api_keys.delete(T, "key_a")  # revoked already: remembered for a day, answered as the first time
    with pytest.raises(NotFound):
        stores.api_keys.delete(T, "key_never")
    with pytest.raises(NotFound):
        stores.api_keys.delete(OTHER, "key_b")
    with pytest.raises(QuotaExceeded):  # the repeated revocation released nothing
        _create(stores, T, "key_d", limit=2)


def test_delete_all_removes_the_tenants_keys_only(stores):
    mine = [_create(stores, T, f"key_{i}") for i in range(2)]
    theirs = _create(stores, OTHER, "key_9")
    assert stores.api_keys.delete_all(T) == 2
    assert stores.api_keys.all(T) == [] and all(stores.api_keys.grant(d) is None for d in mine)
    assert stores.api_keys.grant(theirs) is not None
    _create(stores, T, "key_new", limit=1)  # the counter went with them
