"""The HTTP API's Lambda authorizer (REQUEST type, payload 2.0, simple responses): one bearer
token, an Engram API key or a sign-in JWT, becomes the context every route reads
(`engram.api.http.principal`): `sub`, `via` (key | jwt), `scope` (space-separated) and, for a
key, `keyId`.

- A key (`egk_...`) is looked up by its SHA-256 (one GetItem); unknown, revoked or expired keys
  are refused; its last use is noted at most once a minute.
- A JWT is verified as API Gateway's JWT authorizer did: an RS256 signature by a key of the
  issuer's JWKS (found through its OpenID discovery document, or at AUTH_JWKS_URL where given;
  PyJWT's PyJWKClient keeps the keys, refetching on an unknown `kid`), `iss` equal to the issuer, `exp`/`nbf`/`iat` in range, and
  `aud` or `client_id` (Cognito access tokens carry no `aud`) one of the audiences. Scopes are
  checked by the routes against REQUIRED_SCOPES, as before.

Failed attempts are throttled per source address (the authorizer's own counter, since AWS WAF
cannot be attached to an HTTP API): each refusal adds one to the source's count for the minute
(a TTL'd row, `AUTHFAIL#<ip>`), and a source with FAILED_ATTEMPTS_PER_MINUTE refusals in the
current minute is refused without its credential being looked at until the minute ends. One
GetItem per uncached authorization, one UpdateItem per refusal.

A refusal raises `Refused` ("Unauthorized"), which API Gateway answers with 401 and does not
cache; an answer that lets the caller in is cached by the Authorization header for the
authorizer's TTL (template.yaml `ReauthorizeEvery`, 60 s), which is how long a revoked key may
still work.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from engram.apikeys.models import KEY_PREFIX, KeyGrant, key_hash, looks_like_key
from engram.apikeys.oauth_clients import OAuthClients
from engram.apikeys.ports import ApiKeys
from engram.kernel.observability import logger
from engram.kernel.scopes import granted_scopes
from engram.kernel.settings import Settings

if TYPE_CHECKING:
    import jwt

JWKS_LIFESPAN_S = 3600  # how long fetched signing keys are trusted before the JWKS is read again
FETCH_TIMEOUT_S = 3
# lastUsedAt is written at most once a minute per key.
LAST_USED_EVERY_S = 60
# Refused credentials from one source address in one minute before it is refused outright.
FAILED_ATTEMPTS_PER_MINUTE = 30


class Refused(Exception):
    """The request carries no valid credential: API Gateway answers 401."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class KeyDeps(Protocol):
    settings: Settings

    @property
    def api_keys(self) -> ApiKeys: ...

    @property
    def oauth_clients(self) -> OAuthClients | None: ...  # where the stack registers clients (USER_POOL_ID)


class JwtVerifier:
    """Verifies the issuer's JWTs; the JWKS client (and so its keys) lives as long as this does."""

    def __init__(self, issuer: str, audiences: list[str], *, jwks_url: str | None = None):
        self.issuer = issuer.rstrip("/")
        self.audiences = [a for a in audiences if a]
        self._jwks_url = jwks_url
        self._client: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def _jwks(self) -> jwt.PyJWKClient:
        import jwt  # PyJWT (and cryptography) only with the first JWT: key callers never pay for it

        with self._lock:
            if self._client is None:
                url = self._jwks_url or self._discover()
                self._client = jwt.PyJWKClient(url, cache_keys=True, lifespan=JWKS_LIFESPAN_S, timeout=FETCH_TIMEOUT_S)
            return self._client

    def _discover(self) -> str:
        """The issuer's `jwks_uri`, from its OpenID configuration (as API Gateway finds it)."""
        import urllib.request  # with the first JWT, as PyJWT (which imports it too)

        with urllib.request.urlopen(
            f"{self.issuer}/.well-known/openid-configuration", timeout=FETCH_TIMEOUT_S
        ) as answer:  # the stack's own issuer
            return str(json.loads(answer.read())["jwks_uri"])

    def claims(self, token: str, registered: Callable[[str], bool] | None = None) -> dict[str, object]:
        """The token's claims if it is valid; `registered` says whether a `client_id` outside the
        audiences is a client registered with Engram (RFC 7591, `oauth_clients`)."""
        import jwt

        if not self.issuer or not self.audiences:
            raise Refused()
        try:
            key = self._jwks().get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"require": ["exp", "iat", "sub"], "verify_aud": False},
                leeway=5,
            )
        except (jwt.PyJWTError, OSError, ValueError, KeyError) as err:
            logger.info("token refused", extra={"reason": type(err).__name__})
            raise Refused() from None
        audience = claims.get("aud", claims.get("client_id"))
        given = audience if isinstance(audience, list) else [audience]
        if not any(isinstance(a, str) and a in self.audiences for a in given) and not (
            registered is not None and "aud" not in claims and isinstance(audience, str) and registered(audience)
        ):
            logger.info("token refused", extra={"reason": "audience"})
            raise Refused()
        return claims


def usable(keys: ApiKeys, digest: str, grant: KeyGrant | None, *, now: float | None = None) -> KeyGrant | None:
    """`grant` (read for the key `digest`) if it exists and has not expired; notes the key's use."""
    at = int(now if now is not None else time.time())
    if grant is None or (grant.expires_at is not None and grant.expires_at <= at):
        return None
    if grant.last_used_at is None or grant.last_used_at <= at - LAST_USED_EVERY_S:
        keys.touch(digest, at, every=LAST_USED_EVERY_S)
    return grant


_verifiers: dict[tuple[str, str, str], JwtVerifier] = {}


def verifier_for(settings: Settings) -> JwtVerifier:
    """One verifier per issuer, audience and JWKS URL (per container: its JWKS cache is kept)."""
    which = (settings.auth_issuer, settings.auth_audience, settings.auth_jwks_url)
    found = _verifiers.get(which)
    if found is None:
        audiences = [a.strip() for a in settings.auth_audience.split(",")]
        found = _verifiers[which] = JwtVerifier(settings.auth_issuer, audiences, jwks_url=settings.auth_jwks_url or None)
    return found


def bearer(event: dict[str, Any]) -> str:
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 8192:
        raise Refused()
    return token


def source_of(event: dict[str, object]) -> str:
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, dict) else None
    return str((http.get("sourceIp") if isinstance(http, dict) else None) or "unknown")[:64]


def authorize(deps: KeyDeps, event: dict[str, object], verifier: JwtVerifier | None = None) -> dict[str, object]:
    """The simple response for the request `event`; Refused when it may not pass, or when its
    source has failed too often this minute. A key and the source's count are read together (one
    BatchGetItem); a JWT needs the count only."""
    source, minute = source_of(event), int(time.time()) // 60
    try:
        token = bearer(event)
        digest = key_hash(token) if looks_like_key(token) else ""
        if digest:
            grant, failures = deps.api_keys.grant_and_failures(digest, source, minute)
        else:
            grant, failures = None, deps.api_keys.failed_attempts(source, minute)
        if failures >= FAILED_ATTEMPTS_PER_MINUTE:
            logger.warning("authorization throttled", extra={"source": source})
            raise Refused()
        return _authorize(deps, token, digest, grant, verifier)
    except Refused:
        deps.api_keys.note_failed_attempt(source, minute)
        raise


def _authorize(deps: KeyDeps, token: str, digest: str, grant: KeyGrant | None, verifier: JwtVerifier | None) -> dict[str, object]:
    if token.startswith(KEY_PREFIX):
        found = usable(deps.api_keys, digest, grant) if digest else None
        if found is None:
            raise Refused()
        context = {"sub": found.sub, "via": "key", "scope": " ".join(found.scopes), "keyId": found.key_id}
    else:
        # Clients registered onto the created pool (RFC 7591) are read from the table when met.
        registered = deps.oauth_clients.registered if deps.oauth_clients is not None else None
        claims = (verifier or verifier_for(deps.settings)).claims(token, registered)
        context = {"sub": str(claims["sub"]), "via": "jwt", "scope": " ".join(sorted(granted_scopes(claims)))}
        name = claims.get("name")
        if isinstance(name, str) and 0 < len(name.strip()) <= 100:
            context["name"] = name.strip()  # the person's name: the speaker of their archived turns
    return {"isAuthorized": True, "context": context}
