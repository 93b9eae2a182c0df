"""API key rows. Two per key, written and deleted in one transaction:

PK <t>               SK APIKEY#<keyId>  what the owner lists: name, scopes, hint, expiry, keyHash
PK APIKEY#<sha256>   SK APIKEY          what the authorizer reads: sub, keyId, scopes, expiresAt
                                        (epoch seconds: the table's TTL removes it some time after
                                        it expired), lastUsedAt (epoch seconds)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from engram.apikeys.models import ApiKey, KeyGrant
from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import NotFound

_NOT_FOUND = "API key not found"
_HASH = "keyHash"


def _iso(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ApiKeyRepository:
    def __init__(self, table: Table):
        self.table = table

    def create(self, tenant: str, key: ApiKey, grant: KeyGrant, digest: str, *, limit: int) -> None:
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
        quotas.create_within(
            self.table,
            [
                self.table.put_op(owner, condition="attribute_not_exists(PK)"),
                self.table.put_op(lookup, condition="attribute_not_exists(PK)"),
            ],
            quotas.api_keys(tenant, limit),
        )

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
        pk, sk = keys.tenant_pk(tenant), keys.api_key_sk(key_id)
        item = self.table.get(pk, sk)
        if item is None:
            raise NotFound(_NOT_FOUND, field="keyId")
        try:
            quotas.delete_releasing(
                self.table,
                quotas.api_keys(tenant),
                [
                    self.table.delete_op(pk, sk, condition="attribute_exists(PK)"),
                    self.table.delete_op(keys.api_key_lookup_pk(str(item[_HASH])), keys.API_KEY_LOOKUP_SK),
                ],
            )
        except ConditionFailed:
            raise NotFound(_NOT_FOUND, field="keyId") from None

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
