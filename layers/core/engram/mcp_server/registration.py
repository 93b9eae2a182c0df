"""RFC 7591 dynamic client registration onto Cognito app clients (MX4).

Cognito has no registration endpoint and its discovery document names none, so where the stack
created its user pool (USER_POOL_ID set) Engram names itself as /mcp's authorization server: the
RFC 9728 metadata lists the API's origin, whose RFC 8414 document
(`/.well-known/oauth-authorization-server`) gives the pool's authorize and token endpoints
(managed login) and Engram's `registration_endpoint`, `POST /api/oauth/register`. A registration
creates a public Cognito app client (code + PKCE, no secret, the MCP scopes) whose redirect URIs
are each on the allowlist (Claude's and ChatGPT's callbacks, MCP_REDIRECT_ALLOWLIST) or loopback
over http (`http://127.0.0.1:<port>/...`, `http://localhost:<port>/...`, for CLIs); at most
REGISTERED_CLIENTS_MAX clients in all and REGISTRATIONS_PER_SOURCE_HOUR per source address and
hour; a client not used within REGISTRATION_UNUSED_SECONDS is deleted by the sweeper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engram.apikeys.oauth_clients import OAuthClients
from engram.aws.clients import make_client
from engram.kernel.errors import EngramError, QuotaExceeded
from engram.kernel.settings import Settings

REGISTER_PATH = "/api/oauth/register"
NOT_HERE = (
    "this stack registers no OAuth clients: it has no Cognito user pool of its own (AuthIssuer is given, "
    "or this is the local stack, where the loopback authorization server registers clients itself)"
)


def cognito() -> Any:
    """The cognito-idp client (created on each registration: they are rare)."""
    return make_client("cognito-idp")


class RegistrationRefused(EngramError):
    """RFC 7591 section 3.2.2: a 400 whose `error` is `invalid_redirect_uri` or
    `invalid_client_metadata`."""

    status = 400


class RegistrationThrottled(EngramError):
    status = 429
    code = "too_many_registrations"


class NotRegistering(EngramError):
    status = 404
    code = "registration_not_offered"


class ClientMetadata(BaseModel):
    """The client metadata Engram reads (RFC 7591 section 2); other fields are ignored, as the
    RFC asks of a server that does not support them."""

    model_config = ConfigDict(extra="ignore", defer_build=True)  # built with the first registration

    redirect_uris: list[str] = Field(min_length=1, max_length=10)
    client_name: str = Field("MCP client", min_length=1, max_length=100)
    grant_types: list[Literal["authorization_code", "refresh_token"]] = ["authorization_code", "refresh_token"]
    response_types: list[Literal["code"]] = ["code"]
    token_endpoint_auth_method: Literal["none"] = "none"
    scope: str | None = Field(None, max_length=1000)


def client_scopes(settings: Settings) -> list[str]:
    """The scopes a registered client may ask for: McpClient's and the stack's REQUIRED_SCOPES."""
    return list(dict.fromkeys(settings.mcp_client_scopes.split() + settings.required_scopes.split()))


def _loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1") and not parts.username


def check_redirect(uri: str, allowlist: str) -> None:
    allowed = {u.strip() for u in allowlist.split(",") if u.strip()}
    if len(uri) > 1024 or "#" in uri or not (uri in allowed or _loopback(uri)):
        raise RegistrationRefused(
            f"redirect URI {uri[:200]!r} is not allowed: use Claude's or ChatGPT's callback or a loopback "
            "http://127.0.0.1:<port>/... or http://localhost:<port>/... address",
            field="redirect_uris",
            code="invalid_redirect_uri",
        )


def parse(body: object) -> ClientMetadata:
    try:
        return ClientMetadata.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "body"
        raise RegistrationRefused(f"{field}: {first['msg']}", field=field, code="invalid_client_metadata") from None


def register(
    settings: Settings, clients: OAuthClients | None, idp: Callable[[], Any], body: object, source: str
) -> dict[str, object]:
    """Creates the Cognito app client and answers RFC 7591's client information response."""
    if clients is None or not settings.user_pool_id:
        raise NotRegistering(NOT_HERE)
    metadata = parse(body)
    for uri in metadata.redirect_uris:
        check_redirect(uri, settings.mcp_redirect_allowlist)
    if "authorization_code" not in metadata.grant_types:
        raise RegistrationRefused(
            "grant_types must include authorization_code", field="grant_types", code="invalid_client_metadata"
        )
    if clients.count() >= settings.registered_clients_max:
        raise QuotaExceeded(
            "registered OAuth clients",
            settings.registered_clients_max,
            per="stack",
            setting="REGISTERED_CLIENTS_MAX",
            remedy="unused ones are deleted after REGISTRATION_UNUSED_SECONDS",
            field="client_name",
        )
    if not clients.take_registration_slot(source, settings.registrations_per_source_hour):
        raise RegistrationThrottled(
            f"at most {settings.registrations_per_source_hour} registrations per address and hour; try again later",
            field="source",
        )
    scopes = client_scopes(settings)
    made = idp().create_user_pool_client(
        UserPoolId=settings.user_pool_id,
        ClientName=f"mcp-dcr-{metadata.client_name}"[:128],
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_REFRESH_TOKEN_AUTH"],
        SupportedIdentityProviders=["COGNITO"],
        AllowedOAuthFlowsUserPoolClient=True,
        AllowedOAuthFlows=["code"],
        AllowedOAuthScopes=scopes,
        CallbackURLs=metadata.redirect_uris,
        PreventUserExistenceErrors="ENABLED",
        EnableTokenRevocation=True,
    )["UserPoolClient"]
    client_id = str(made["ClientId"])
    issued_at = int(time.time())
    clients.record(
        client_id,
        name=metadata.client_name,
        redirect_uris=metadata.redirect_uris,
        issued_at=issued_at,
        unused_for=settings.registration_unused_s,
    )
    return {
        "client_id": client_id,
        "client_id_issued_at": issued_at,
        "client_name": metadata.client_name,
        "redirect_uris": metadata.redirect_uris,
        "grant_types": metadata.grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": " ".join(scopes),
    }


def authorization_server(settings: Settings, origin: str) -> dict[str, object]:
    """RFC 8414 metadata naming the pool's managed-login endpoints and Engram's registration."""
    login = settings.console_login_url.rstrip("/")
    return {
        "issuer": origin,
        "authorization_endpoint": f"{login}/oauth2/authorize",
        "token_endpoint": f"{login}/oauth2/token",
        "revocation_endpoint": f"{login}/oauth2/revoke",
        "registration_endpoint": f"{origin}{REGISTER_PATH}",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": client_scopes(settings),
    }
