"""Personal API keys (MX2): managed with a sign-in token only (a key cannot mint or revoke keys)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Deps, Limit, Reply, SignedIn, Token, idempotency_key, ok
from engram.apikeys import service as api_keys
from engram.apikeys.models import ApiKeyCreate

router = Router()


@router.post("/api/me/api-keys")
def create_api_key(deps: Deps, who: SignedIn, body: ApiKeyCreate) -> Reply:
    return ok(api_keys.create_key(deps.api_keys, deps.settings, who.tenant, who.sub, body, idempotency_key(router)), 201)


@router.get("/api/me/api-keys")
def list_api_keys(deps: Deps, who: SignedIn, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(api_keys.list_keys(deps.api_keys, who.tenant, limit, nextToken))


@router.delete("/api/me/api-keys/<keyId>")
def delete_api_key(deps: Deps, who: SignedIn, keyId: str) -> Reply:
    return ok(api_keys.delete_key(deps.api_keys, deps.streams, deps.pusher, who.tenant, keyId))
