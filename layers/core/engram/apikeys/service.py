"""Use cases of API keys: create (the key shown once), list, revoke. The key check is the
authorizer's (`apikeys.authorizer.authorize`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.apikeys.models import HINT_CHARS, ApiKey, ApiKeyCreate, KeyGrant, key_hash, new_key
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import now_iso, page
from engram.streaming import closing as streaming

if TYPE_CHECKING:
    from engram.apikeys.ports import ApiKeys
    from engram.kernel.settings import Settings
    from engram.streaming.ports import Pusher, Streams


def create_key(
    keys: ApiKeys, settings: Settings, tenant: str, sub: str, body: ApiKeyCreate, request_key: str | None = None
) -> dict[str, object]:
    """The new key's resource and, once only, the key itself (`key`). `request_key` (the
    Idempotency-Key header): a retry within a day gets the key the first send made, with a new
    secret (the first one stops working), so a lost answer leaves no orphan key."""
    secret = new_key()
    now = now_iso()
    expires = body.expires_at
    key = ApiKey(
        id=new_id("key"),
        created_at=now,
        updated_at=now,
        name=body.name,
        scopes=list(body.scopes),
        hint=secret[:HINT_CHARS],
        expires_at=expires.isoformat(timespec="seconds").replace("+00:00", "Z") if expires else None,
    )
    grant = KeyGrant(sub=sub, key_id=key.id, scopes=tuple(body.scopes), expires_at=int(expires.timestamp()) if expires else None)
    stored = keys.create(tenant, key, grant, key_hash(secret), limit=settings.max_api_keys, request_key=request_key)
    return {**stored.public(), "key": secret}


def list_keys(keys: ApiKeys, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    return page(*keys.page(tenant, limit=limit, token=token))


def delete_key(keys: ApiKeys, streams: Streams, pusher: Pusher, tenant: str, key_id: str) -> dict[str, object]:
    keys.delete(tenant, check_id("keyId", key_id))
    streaming.close_opened_with(streams, pusher, tenant, key_id)  # its sockets close too (MX6)
    return {"id": key_id, "deleted": True}
