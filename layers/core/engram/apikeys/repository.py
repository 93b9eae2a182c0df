"""API key rows. Two per key, written and deleted in one transaction:

PK <t>               SK APIKEY#<keyId>  what the owner lists: name, scopes, hint, expiry, keyHash
PK APIKEY#<sha256>   SK APIKEY          what the authorizer reads: sub, keyId, scopes, expiresAt
                                        (epoch seconds: the table's TTL removes it some time after
                                        it expired), lastUsedAt (epoch seconds)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from engram.apikeys.models import ApiKey, KeyGrant
from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import Conflict, NotFound, OutcomeUnknown, aws_unavailable
from engram.kernel.ids import check_id

_NOT_FOUND = "API key not found"
_DAY_S = 24 * 3600  # how long an Idempotency-Key names its key, and a revocation is remembered


def _request_sk(request_key: str) -> str:
    """The claim of a create's Idempotency-Key, naming the key it made (its own prefix: not listed)."""
    return f"APIKEYREQ#{check_id('Idempotency-Key', request_key)}"


def _revoked_sk(key_id: str) -> str:
    return f"APIKEYGONE#{check_id('keyId', key_id)}"


_HASH = "keyHash"


def _iso(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ApiKeyRepository:
    def __init__(self, table: Table):
        self.table = table

    def _rows(self, tenant: str, key: ApiKey, grant: KeyGrant, digest: str) -> tuple[dict[str, object], dict[str, object]]:
        owner = {"PK": keys.tenant_pk(tenant), "SK": keys.api_key_sk(key.id), **key.model_dump(by_alias=True), _HASH: digest}
        owner.pop("lastUsedAt", None)
        lookup: dict[str, Any] = {
            "PK": keys.api_key_lookup_pk(digest),
            "SK": keys.API_KEY_LOOKUP_SK,
            "sub": grant.sub,
            "keyId": grant.key_id,
            "scopes": list(grant.scopes),
        }
        if grant.expires_at is not None:
            lookup["expiresAt"] = grant.expires_at
        return owner, lookup

    def create(
        self, tenant: str, key: ApiKey, grant: KeyGrant, digest: str, *, limit: int, request_key: str | None = None
    ) -> ApiKey:
        owner, lookup = self._rows(tenant, key, grant, digest)
        ops = [
            self.table.put_op(owner, condition="attribute_not_exists(PK)"),
            self.table.put_op(lookup, condition="attribute_not_exists(PK)"),
        ]
        now = int(time.time())
        if request_key:
            claim = {"PK": keys.tenant_pk(tenant), "SK": _request_sk(request_key), "keyId": key.id, "expiresAt": now + _DAY_S}
            ops.append(self.table.put_op(claim, condition="attribute_not_exists(PK) OR expiresAt <= :now", values={":now": now}))
        try:
            quotas.create_within(self.table, ops, quotas.api_keys(tenant, limit))
        except ConditionFailed as err:
            if request_key and err.failed_at(2):
                return self._reissue(tenant, request_key, key, digest)
            if not self._stored(tenant, key.id, digest):  # a lost answer's retry met our own rows
                raise
        except Exception as err:
            if not aws_unavailable(err) or not self._stored(tenant, key.id, digest):
                raise
        return key

    def _stored(self, tenant: str, key_id: str, digest: str) -> bool:
        """Whether this very key is stored; unreadable: the outcome is unknown (503 naming where to look)."""
        try:
            item = self.table.get(keys.tenant_pk(tenant), keys.api_key_sk(key_id))
        except Exception as err:
            raise OutcomeUnknown(see="GET /api/me/api-keys", field="keyId") from err
        return item is not None and item.get(_HASH) == digest

    def _reissue(self, tenant: str, request_key: str, key: ApiKey, digest: str) -> ApiKey:
        """A retry of a create: the key its first send made gets this send's secret (the first
        answer was not received, or this one replaces it): one key, counted once."""
        pk = keys.tenant_pk(tenant)
        claim = self.table.get(pk, _request_sk(request_key))
        item = self.table.get(pk, keys.api_key_sk(str(claim["keyId"]))) if claim else None
        old_lookup = self.table.get(keys.api_key_lookup_pk(str(item[_HASH])), keys.API_KEY_LOOKUP_SK) if item else None
        if item is None or old_lookup is None:
            raise Conflict(
                "the key this Idempotency-Key created was revoked; send the request with a new key", field="Idempotency-Key"
            )
        again = ApiKey.model_validate({**item, "hint": key.hint, "updatedAt": key.updated_at})
        owner = {**item, "hint": key.hint, "updatedAt": key.updated_at, _HASH: digest}
        lookup = {**old_lookup, "PK": keys.api_key_lookup_pk(digest)}
        lookup.pop("lastUsedAt", None)
        self.table.transact(
            [
                self.table.put_op(owner, condition="#h = :old", names={"#h": _HASH}, values={":old": item[_HASH]}),
                self.table.delete_op(str(old_lookup["PK"]), keys.API_KEY_LOOKUP_SK),
                self.table.put_op(lookup, condition="attribute_not_exists(PK)"),
            ]
        )
        return again

    def _with_last_use(self, items: Sequence[Mapping[str, object]]) -> list[ApiKey]:
        digests = [str(i[_HASH]) for i in items if i.get(_HASH)]
        found = self.table.get_many([(keys.api_key_lookup_pk(d), keys.API_KEY_LOOKUP_SK) for d in digests])
        used = {str(row["PK"]).removeprefix("APIKEY#"): row.get("lastUsedAt") for row in found}
        out = []
        for item in items:
            last = used.get(str(item.get(_HASH)))
            out.append(ApiKey.model_validate({**item, "lastUsedAt": _iso(int(last)) if last is not None else None}))
        return out

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[ApiKey], str | None]:
        items, nxt = self.table.query(keys.tenant_pk(tenant), sk_prefix="APIKEY#", limit=limit, token=token)
        return self._with_last_use(items), nxt

    def all(self, tenant: str) -> list[ApiKey]:
        return self._with_last_use(self.table.query_all(keys.tenant_pk(tenant), sk_prefix="APIKEY#"))

    def delete(self, tenant: str, key_id: str) -> None:
        """Revokes the key; a revocation is remembered for a day (a tombstone row), so a retry of
        it (a lost answer, a client's resend) answers as the first did instead of 404."""
        pk, sk = keys.tenant_pk(tenant), keys.api_key_sk(key_id)
        item = self.table.get(pk, sk)
        if item is None:
            if self.table.get(pk, _revoked_sk(key_id)) is None:
                raise NotFound(_NOT_FOUND, field="keyId")
            return
        tombstone = {"PK": pk, "SK": _revoked_sk(key_id), "expiresAt": int(time.time()) + _DAY_S}
        try:
            quotas.delete_releasing(
                self.table,
                quotas.api_keys(tenant),
                [
                    self.table.delete_op(pk, sk, condition="attribute_exists(PK)"),
                    self.table.delete_op(keys.api_key_lookup_pk(str(item[_HASH])), keys.API_KEY_LOOKUP_SK),
                    self.table.put_op(tombstone),
                ],
            )
        except ConditionFailed:
            if self.table.get(pk, _revoked_sk(key_id)) is None:  # gone, but not revoked by anyone: deleted with the account
                raise NotFound(_NOT_FOUND, field="keyId") from None
        except Exception as err:
            if not aws_unavailable(err):
                raise
            try:
                gone = self.table.get(pk, sk) is None
            except Exception:
                raise OutcomeUnknown(see="GET /api/me/api-keys", field="keyId") from err
            if not gone:
                raise

    def delete_all(self, tenant: str) -> int:
        pk = keys.tenant_pk(tenant)
        items = self.table.query_all(pk, sk_prefix="APIKEY#")
        # The lookup rows first: a key must stop working even if the rest fails half-way.
        self.table.batch_write(deletes=[(keys.api_key_lookup_pk(str(i[_HASH])), keys.API_KEY_LOOKUP_SK) for i in items])
        self.table.batch_write(deletes=[(pk, str(i["SK"])) for i in items])
        quotas.forget(self.table, quotas.api_keys(tenant))
        return len(items)

    def alive(self, tenant: str, key_id: str, now: int) -> bool:
        """Whether the key is still there (not revoked, its account not deleted) and not expired:
        one strongly consistent GetItem of the owner's row, on every request made with a key."""
        item = self.table.get(keys.tenant_pk(tenant), keys.api_key_sk(key_id))
        if item is None:
            return False
        expires = item.get("expiresAt")
        return not expires or datetime.fromisoformat(str(expires)).timestamp() > now

    # --- the authorizer's side ------------------------------------------------------------------
    def grant(self, digest: str) -> KeyGrant | None:
        return _grant(self.table.get(keys.api_key_lookup_pk(digest), keys.API_KEY_LOOKUP_SK))

    def grant_and_failures(self, digest: str, source: str, minute: int) -> tuple[KeyGrant | None, int]:
        """The key's grant and the source's failed attempts this minute, in one BatchGetItem."""
        lookup, failures = keys.api_key_lookup_pk(digest), keys.auth_failures_pk(source)
        rows = {str(r["PK"]): r for r in self.table.get_many([(lookup, keys.API_KEY_LOOKUP_SK), (failures, f"m#{minute}")])}
        counted = rows.get(failures)
        return _grant(rows.get(lookup)), int(counted.get("n", 0)) if counted else 0

    def failed_attempts(self, source: str, minute: int) -> int:
        item = self.table.get(keys.auth_failures_pk(source), f"m#{minute}")
        return int(item.get("n", 0)) if item else 0

    def note_failed_attempt(self, source: str, minute: int) -> None:
        """One more refused credential from `source` in `minute` (epoch minutes); the row goes
        with the table's TTL two minutes after its minute ends."""
        self.table.update(
            keys.auth_failures_pk(source),
            f"m#{minute}",
            "ADD #n :one SET #e = :expires",
            names={"#n": "n", "#e": "expiresAt"},
            values={":one": 1, ":expires": (minute + 3) * 60},
            returns="NONE",
        )

    def touch(self, digest: str, now: int, *, every: int) -> None:
        """Sets lastUsedAt to `now` unless it was set less than `every` seconds ago (or the key is
        gone): at most one write per key per `every` seconds, however many containers check it."""
        try:
            self.table.update(
                keys.api_key_lookup_pk(digest),
                keys.API_KEY_LOOKUP_SK,
                "SET #u = :now",
                condition="attribute_exists(PK) AND (attribute_not_exists(#u) OR #u <= :before)",
                names={"#u": "lastUsedAt"},
                values={":now": now, ":before": now - every},
                returns="NONE",
            )
        except ConditionFailed:
            pass


def _grant(item: Mapping[str, object] | None) -> KeyGrant | None:
    if item is None:
        return None
    scopes = item.get("scopes")
    return KeyGrant(
        sub=str(item["sub"]),
        key_id=str(item["keyId"]),
        scopes=tuple(str(s) for s in scopes) if isinstance(scopes, list | tuple | set) else (),
        expires_at=_epoch(item.get("expiresAt")),
        last_used_at=_epoch(item.get("lastUsedAt")),
    )


def _epoch(value: object) -> int | None:
    return None if value is None else int(Decimal(str(value)))
