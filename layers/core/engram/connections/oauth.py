"""OAuth connections (TL9), as the MCP authorization spec (2025-11-25) describes them.

A connection created with `oauth` starts `needs_authorization`. `start` discovers the server's
authorization server (RFC 9728 from its 401, RFC 8414 or OIDC metadata), picks a client in the
spec's order (the pre-registered client given with the connection; a Client ID Metadata Document
Engram serves, when the server supports it and the API is https; dynamic registration, RFC 7591),
and answers an authorization URL: code flow with PKCE (S256) and the `resource` (RFC 8707).
The browser comes back to the API's public callback; the `state` it carries is random, kept only
as its SHA-256, bound to the user and the connection, one-time and expiring, so the callback
needs no token. The tokens are sealed with KMS in the connection's `sealedAuth`, exactly as an
auth header is; the function that calls a tool refreshes them before they expire; deleting the
connection revokes them (RFC 7009) where the server offers it. A grant that lapses (a refresh
refused) puts the connection back to `needs_authorization`, and its tools answer so.

No token, code, verifier or client secret is ever logged, returned or put in an error message.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import urlencode, urlsplit

from pydantic import BaseModel, ConfigDict

from engram.connections.egress import EgressPolicy
from engram.connections.models import Connection, OAuthRow, OAuthStatus, Registration, secret_context
from engram.connections.ports import Connections, OAuthStates, SecretBox
from engram.kernel.errors import BadRequest, EngramError, NotFound
from engram.kernel.ids import check_id
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.kernel.settings import Settings

if TYPE_CHECKING:
    from engram.connections.oauth_http import ClientAuth, Discovery

CALLBACK_PATH = "/api/connections/oauth/callback"
CLIENT_METADATA_PATH = "/api/connections/oauth/client-metadata.json"
_REFRESH_AHEAD_S = 60  # refresh this long before expiry (a quarter of a shorter lifetime)
_REFRESH_LEASE_S = 10  # one refresh at a time per connection; a stuck one is taken over after this
TokenAuth = Literal["none", "client_secret_basic", "client_secret_post"]


class OAuthDeps(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def connections(self) -> Connections: ...
    @property
    def oauth_states(self) -> OAuthStates: ...
    @property
    def secret_box(self) -> SecretBox: ...


class NeedsAuthorization(EngramError):
    """The connection has no usable grant: a person must authorise it (again)."""

    status = 409
    code = "needs_authorization"


class AuthorizationRefused(EngramError):
    """A callback that cannot complete: unknown, replayed or expired state, or the server's refusal."""

    status = 400
    code = "authorization_refused"


class OAuthServer(BaseModel):
    """What discovery and registration found, kept (as JSON, no secret in it) in the connection's
    row: the next authorization and every refresh need no discovery."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built with the first OAuth connection

    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    revocation_endpoint: str | None = None
    registration: Registration
    client_id: str
    token_auth: TokenAuth = "none"
    redirect_uri: str
    scope: str | None = None


class Tokens(BaseModel):
    """The grant, sealed as one JSON text in `sealedAuth`."""

    model_config = ConfigDict(defer_build=True)  # built with the first grant read or written

    access_token: str
    refresh_token: str | None = None
    expires_at: int | None = None  # epoch seconds
    issued_at: int
    scope: str | None = None

    def due(self, now: float) -> bool:
        if self.expires_at is None:
            return False
        ahead = min(_REFRESH_AHEAD_S, max(1, (self.expires_at - self.issued_at) // 4))
        return now >= self.expires_at - ahead


def policy_of(settings: Settings) -> EgressPolicy:
    return EgressPolicy.of(settings.tool_egress, settings.allow_private_tool_hosts)


def _hash(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8")).hexdigest()


def _row(deps: OAuthDeps, tenant: str, connection_id: str) -> OAuthRow:
    row = deps.connections.oauth_row(tenant, check_id("connectionId", connection_id))
    if row is None:
        raise NotFound("connection not found", field="connectionId")
    if row.connection.oauth is None:
        raise BadRequest("this connection authorises with a header, not OAuth", field="connectionId", code="not_oauth")
    return row


def _server(row: OAuthRow) -> OAuthServer | None:
    return OAuthServer.model_validate_json(row.server) if row.server else None


def base_url_of(settings: Settings, host: str | None, proto: str | None) -> str:
    """The API's public URL: PUBLIC_API_URL, else the host and scheme the request came with."""
    if settings.public_api_url:
        return settings.public_api_url.rstrip("/")
    if not host or any(c in host for c in "/\\@ ") or len(host) > 255:
        raise BadRequest("the request names no usable host for the redirect URI; set PUBLIC_API_URL", code="no_public_url")
    scheme = "http" if proto == "http" and settings.tool_egress == "local" else "https"
    return f"{scheme}://{host}"


def client_metadata_document(base: str) -> dict[str, object]:
    """Engram's Client ID Metadata Document: its client id is the document's own URL."""
    return {
        "client_id": base + CLIENT_METADATA_PATH,
        "client_name": "Engram",
        "client_uri": base + "/",
        "redirect_uris": [base + CALLBACK_PATH],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


# --- starting an authorization -------------------------------------------------------------------
def start(deps: OAuthDeps, tenant: str, connection_id: str, base: str) -> dict[str, object]:
    """Discovers (again), picks the client, and answers `{authorizationUrl, expiresAt}`."""
    row = _row(deps, tenant, connection_id)
    server = prepare(deps, tenant, row, base)
    return authorization_url(deps, tenant, row.connection, server)


def prepare(deps: OAuthDeps, tenant: str, row: OAuthRow, base: str) -> OAuthServer:
    """The discovered server and the client Engram is known by there, stored on the connection.
    A client registered before for the same issuer and redirect URI is kept."""
    from engram.connections.oauth_http import OAuthFailure, discover

    policy = policy_of(deps.settings)
    try:
        found = discover(policy, row.connection.url)
        server = _choose_client(deps, row, found, base)
    except OAuthFailure as err:
        raise BadRequest(f"OAuth discovery failed: {err.message}", field="url", code=f"oauth_{err.code}") from None
    status = (row.connection.oauth or OAuthStatus()).model_copy(
        update={"issuer": server.issuer, "registration": server.registration, "client_id": server.client_id}
    )
    deps.connections.update(
        tenant,
        row.connection.id,
        {"oauthServer": server.model_dump_json(), "oauth": status.model_dump(by_alias=True), "updatedAt": now_iso()},
    )
    return server


def _choose_client(deps: OAuthDeps, row: OAuthRow, found: Discovery, base: str) -> OAuthServer:
    from engram.connections.oauth_http import OAuthFailure, register

    metadata = found.metadata
    redirect_uri = base + CALLBACK_PATH
    scope = row.requested_scope or found.scope
    methods = metadata.get("token_endpoint_auth_methods_supported")
    supported = [str(m) for m in methods] if isinstance(methods, list) else ["client_secret_basic"]
    common = {
        "resource": found.resource,
        "issuer": str(metadata["issuer"]),
        "authorization_endpoint": str(metadata["authorization_endpoint"]),
        "token_endpoint": str(metadata["token_endpoint"]),
        "revocation_endpoint": metadata.get("revocation_endpoint")
        if isinstance(metadata.get("revocation_endpoint"), str)
        else None,
        "redirect_uri": redirect_uri,
        "scope": scope,
    }
    preregistered = row.preregistered_client_id
    if preregistered:  # 1. the client the person registered and gave with the connection
        auth: TokenAuth = "none"
        if row.sealed_client_secret:
            auth = (
                "client_secret_post"
                if "client_secret_post" in supported and "client_secret_basic" not in supported
                else "client_secret_basic"
            )
        return OAuthServer(registration="preregistered", client_id=preregistered, token_auth=auth, **common)
    if metadata.get("client_id_metadata_document_supported") is True and base.startswith("https://"):
        # 2. a Client ID Metadata Document: the client id is the URL of Engram's document
        return OAuthServer(registration="metadata_document", client_id=base + CLIENT_METADATA_PATH, **common)
    known = _server(row)
    if known and known.registration == "dynamic" and known.issuer == common["issuer"] and known.redirect_uri == redirect_uri:
        return OAuthServer(registration="dynamic", client_id=known.client_id, **common)
    endpoint = metadata.get("registration_endpoint")
    if isinstance(endpoint, str):  # 3. dynamic registration
        client = register(policy_of(deps.settings), endpoint, redirect_uri=redirect_uri, scope=scope)
        return OAuthServer(registration="dynamic", client_id=str(client["client_id"]), **common)
    raise OAuthFailure(
        "no_client",
        "the authorization server offers neither client metadata documents nor dynamic registration; "
        "register Engram there and give its clientId with the connection",
    )


def authorization_url(deps: OAuthDeps, tenant: str, connection: Connection, server: OAuthServer) -> dict[str, object]:
    """A fresh state and PKCE pair, kept for the callback; the URL the person opens."""
    state = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")
    expires_at = int(time.time()) + deps.settings.oauth_state_ttl_s
    deps.oauth_states.put(
        _hash(state),
        {"tenant": tenant, "connectionId": connection.id, "clientId": server.client_id, "verifier": verifier},
        expires_at=expires_at,
    )
    query = {
        "response_type": "code",
        "client_id": server.client_id,
        "redirect_uri": server.redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": server.resource,
    }
    if server.scope:
        query["scope"] = server.scope
    separator = "&" if urlsplit(server.authorization_endpoint).query else "?"
    return {
        "authorizationUrl": server.authorization_endpoint + separator + urlencode(query),
        "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at)),
    }


def pending(deps: OAuthDeps, tenant: str, connection: Connection) -> dict[str, object] | None:
    """For a connection that needs authorization: `{status, reason, authorizationUrl?}` (a URL
    when the server is known; else the start route makes one)."""
    if connection.oauth is None or connection.oauth.status == "authorized":
        return None
    row = deps.connections.oauth_row(tenant, connection.id)
    server = _server(row) if row else None
    out: dict[str, object] = {"status": "needs_authorization", "reason": connection.oauth.reason or "not_authorized"}
    out["start"] = f"/api/connections/{connection.id}/oauth/start"
    if server is not None:
        out.update(authorization_url(deps, tenant, connection, server))
    return out


# --- the callback --------------------------------------------------------------------------------
def finish(deps: OAuthDeps, state: str | None, code: str | None, error: str | None, iss: str | None = None) -> Connection:
    """Takes the state (once), exchanges the code, seals the tokens; the connection it authorised."""
    from engram.connections.oauth_http import OAuthFailure, token

    if not state or len(state) > 128:
        raise AuthorizationRefused("the callback carries no state; start the authorization again", field="state")
    record = deps.oauth_states.take(_hash(state))
    if record is None:
        raise AuthorizationRefused("this authorization is unknown or was used already; start it again", field="state")
    if int(str(record.get("expiresAt", 0))) <= time.time():
        raise AuthorizationRefused("this authorization expired; start it again", field="state", code="authorization_expired")
    tenant, connection_id = str(record["tenant"]), str(record["connectionId"])
    row = deps.connections.oauth_row(tenant, connection_id)
    server = _server(row) if row else None
    if row is None or server is None or server.client_id != record["clientId"]:
        raise AuthorizationRefused("the connection was deleted or changed meanwhile; start again", field="state")
    if iss is not None and iss != server.issuer:  # RFC 9207: the answer came from another server (mix-up)
        raise AuthorizationRefused("the answer names another authorization server than the one asked", field="iss")
    if error:
        raise AuthorizationRefused(f"the authorization server answered {error[:64]!r}; nothing was granted", field="error")
    if not code or len(code) > 512:
        raise AuthorizationRefused("the callback carries no code", field="code")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": server.redirect_uri,
        "code_verifier": str(record["verifier"]),
        "resource": server.resource,
    }
    try:
        answer = token(policy_of(deps.settings), server.token_endpoint, form, _client_auth(deps, tenant, row, server))
    except OAuthFailure as err:
        raise AuthorizationRefused(f"the code could not be exchanged: {err.message}", field="code") from None
    tokens = _tokens_of(answer, previous=None)
    _store(deps, tenant, row, tokens, expected=row.sealed_tokens)
    logger.info("oauth connection authorized", extra={"connection": connection_id})
    found = deps.connections.get(tenant, connection_id)
    assert found is not None
    return found


def _client_auth(deps: OAuthDeps, tenant: str, row: OAuthRow, server: OAuthServer) -> ClientAuth:
    from engram.connections.oauth_http import ClientAuth

    secret = None
    if server.token_auth != "none" and row.sealed_client_secret:
        secret = deps.secret_box.open(row.sealed_client_secret, secret_context(tenant, row.connection.id))
    return ClientAuth(server.client_id, secret, server.token_auth)


def _tokens_of(answer: dict[str, object], previous: Tokens | None) -> Tokens:
    now = int(time.time())
    expires_in = answer.get("expires_in")
    refresh = answer.get("refresh_token")
    return Tokens(
        access_token=str(answer["access_token"]),
        # A server that does not rotate refresh tokens leaves them out of a refresh's answer.
        refresh_token=str(refresh) if isinstance(refresh, str) else (previous.refresh_token if previous else None),
        expires_at=now + int(expires_in) if isinstance(expires_in, int) and not isinstance(expires_in, bool) else None,
        issued_at=now,
        scope=str(answer["scope"]) if isinstance(answer.get("scope"), str) else (previous.scope if previous else None),
    )


def _store(deps: OAuthDeps, tenant: str, row: OAuthRow, tokens: Tokens, *, expected: str | None) -> str | None:
    """Seals the tokens into the row if it still holds `expected`; the new sealed value, or None
    when another function replaced them first."""
    sealed = deps.secret_box.seal(tokens.model_dump_json(), secret_context(tenant, row.connection.id))
    status = (row.connection.oauth or OAuthStatus()).model_copy(
        update={"status": "authorized", "scope": tokens.scope, "authorized_at": now_iso(), "reason": None}
    )
    replaced = deps.connections.replace_tokens(
        tenant, row.connection.id, expected=expected, sealed=sealed, oauth=status.model_dump(by_alias=True)
    )
    return sealed if replaced else None


# --- using the grant ------------------------------------------------------------------------------
def bearer(deps: OAuthDeps, tenant: str, connection: Connection, sealed: str | None, *, opened: Opener) -> str:
    """A usable access token for the connection: the stored one, or a refreshed one when it is
    about to expire (raises NeedsAuthorization when there is none and none can be had)."""
    if not sealed or connection.oauth is None or connection.oauth.status != "authorized":
        raise NeedsAuthorization(_needs_message(connection))
    tokens = Tokens.model_validate_json(opened(tenant, connection.id, sealed))
    if not tokens.due(time.time()):
        return tokens.access_token
    return refresh(deps, tenant, connection.id, sealed, tokens, opened=opened).access_token


def distrust(deps: OAuthDeps, tenant: str, connection_id: str) -> None:
    """The server refused the access token before its time (revoked, keys rotated): the grant is
    marked expired so the next call refreshes it first (and a refused refresh then says
    needs_authorization). Best effort: the call has failed already."""
    try:
        row = deps.connections.oauth_row(tenant, connection_id)
        if row is None or not row.sealed_tokens or row.connection.oauth is None:
            return
        context = secret_context(tenant, connection_id)
        tokens = Tokens.model_validate_json(deps.secret_box.open(row.sealed_tokens, context))
        if tokens.expires_at is not None and tokens.expires_at <= tokens.issued_at:
            return  # marked already
        stale = tokens.model_copy(update={"expires_at": tokens.issued_at})
        sealed = deps.secret_box.seal(stale.model_dump_json(), context)
        status = row.connection.oauth.model_dump(by_alias=True)
        deps.connections.replace_tokens(tenant, connection_id, expected=row.sealed_tokens, sealed=sealed, oauth=status)
    except Exception:
        logger.warning("could not mark an OAuth grant for renewal", extra={"connection": connection_id})


class Opener(Protocol):
    def __call__(self, tenant: str, connection_id: str, sealed: str) -> str: ...


def refresh(deps: OAuthDeps, tenant: str, connection_id: str, sealed: str, tokens: Tokens, *, opened: Opener) -> Tokens:
    """Refreshes the grant (RFC 6749 §6 with the `resource`); a refused refresh marks the
    connection `needs_authorization`. One function refreshes at a time (a lease in the row: a
    server that rotates refresh tokens takes a reused one for a stolen one and ends the grant);
    the others use the current token while it lasts, else wait for the new one."""
    now = time.time()
    if not deps.connections.claim_refresh(tenant, connection_id, until=int(now) + _REFRESH_LEASE_S, now=int(now)):
        if tokens.expires_at is None or now < tokens.expires_at - 1:
            return tokens  # still valid: the other function's refresh serves the next call
        row = deps.connections.oauth_row(tenant, connection_id)
        if row is None:
            raise NeedsAuthorization("the connection is no longer set up for OAuth")
        return _await_refresh(deps, tenant, row.connection, sealed, opened)
    stored = False
    try:
        row = deps.connections.oauth_row(tenant, connection_id)  # under the lease: the latest grant
        if row is None or _server(row) is None:
            raise NeedsAuthorization("the connection is no longer set up for OAuth")
        current = _current(tenant, row, sealed, tokens, opened)
        if not current.due(time.time()):
            return current  # another function refreshed it meanwhile
        fresh, stored = _refresh_now(deps, tenant, row, current)
        return fresh
    finally:
        if not stored:  # a stored grant has freed the lease with the same write
            deps.connections.release_refresh(tenant, connection_id)


def _current(tenant: str, row: OAuthRow, sealed: str, tokens: Tokens, opened: Opener) -> Tokens:
    """The grant the row holds now (another function may have refreshed it since `sealed`)."""
    if row.sealed_tokens and row.sealed_tokens != sealed:
        return Tokens.model_validate_json(opened(tenant, row.connection.id, row.sealed_tokens))
    return tokens


def _refresh_now(deps: OAuthDeps, tenant: str, row: OAuthRow, tokens: Tokens) -> tuple[Tokens, bool]:
    """The new grant, and whether it was stored (the row still held the one refreshed)."""
    from engram.connections.oauth_http import OAuthFailure, token

    server = _server(row)
    assert server is not None
    if not tokens.refresh_token:
        _lapse(deps, tenant, row, "expired")
        raise NeedsAuthorization(_needs_message(row.connection, "its access expired and the server gave no refresh token"))
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "resource": server.resource}
    if tokens.scope:
        form["scope"] = tokens.scope
    try:
        answer = token(policy_of(deps.settings), server.token_endpoint, form, _client_auth(deps, tenant, row, server))
    except OAuthFailure as err:
        if err.code in ("invalid_grant", "invalid_client", "unauthorized_client"):
            _lapse(deps, tenant, row, "refresh_refused")
            raise NeedsAuthorization(_needs_message(row.connection, "the server refused to renew its access")) from None
        raise NeedsAuthorization(_needs_message(row.connection, f"its access could not be renewed now ({err.code})")) from None
    fresh = _tokens_of(answer, previous=tokens)
    stored = _store(deps, tenant, row, fresh, expected=row.sealed_tokens) is not None
    logger.info("oauth token refreshed", extra={"connection": row.connection.id})
    return fresh, stored


def _await_refresh(deps: OAuthDeps, tenant: str, connection: Connection, seen: str | None, opened: Opener) -> Tokens:
    """Another function holds the refresh lease and the token has expired: its new grant, once written."""
    deadline = time.monotonic() + _REFRESH_LEASE_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        row = deps.connections.oauth_row(tenant, connection.id)
        if row is None or row.connection.oauth is None or row.connection.oauth.status != "authorized" or not row.sealed_tokens:
            raise NeedsAuthorization(_needs_message(connection, "the server refused to renew its access"))
        if row.sealed_tokens != seen:
            return Tokens.model_validate_json(opened(tenant, connection.id, row.sealed_tokens))
    raise NeedsAuthorization(_needs_message(connection, "its access could not be renewed in time"))


def _lapse(deps: OAuthDeps, tenant: str, row: OAuthRow, reason: str) -> None:
    status = (row.connection.oauth or OAuthStatus()).model_copy(update={"status": "needs_authorization", "reason": reason})
    deps.connections.replace_tokens(
        tenant, row.connection.id, expected=row.sealed_tokens, sealed=None, oauth=status.model_dump(by_alias=True)
    )
    logger.info("oauth connection needs authorization", extra={"connection": row.connection.id, "reason": reason})


def _needs_message(connection: Connection, why: str = "it has not been authorised") -> str:
    return (
        f"connection {connection.name} needs authorization: {why}. Its owner connects it again on the Tools page "
        f"(or `engram connections authorize {connection.id}`)"
    )


# --- revocation ---------------------------------------------------------------------------------
def revoke(deps: OAuthDeps, tenant: str, row: OAuthRow) -> bool:
    """Revokes the grant at the server (RFC 7009) where it offers revocation. Best effort: True
    when the server took it."""
    server = _server(row)
    if server is None or not server.revocation_endpoint or not row.sealed_tokens:
        return False
    from engram.connections.oauth_http import OAuthFailure
    from engram.connections.oauth_http import revoke as send_revoke

    try:
        tokens = Tokens.model_validate_json(deps.secret_box.open(row.sealed_tokens, secret_context(tenant, row.connection.id)))
        auth = _client_auth(deps, tenant, row, server)
        policy = policy_of(deps.settings)
        # Revoking the refresh token ends the grant (RFC 7009 §2.1: the server should drop its
        # access tokens too); without one, the access token itself.
        if tokens.refresh_token:
            return send_revoke(policy, server.revocation_endpoint, tokens.refresh_token, "refresh_token", auth)
        return send_revoke(policy, server.revocation_endpoint, tokens.access_token, "access_token", auth)
    except (OAuthFailure, EngramError, ValueError) as err:
        logger.warning("oauth revocation failed", extra={"connection": row.connection.id, "error": type(err).__name__})
        return False


def seal_client_secret(deps: OAuthDeps, tenant: str, connection_id: str, secret: str) -> str:
    return deps.secret_box.seal(secret, secret_context(tenant, connection_id))
