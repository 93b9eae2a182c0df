"""Connections to remote MCP servers: request bodies, the public resource, discovered tools."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    computed_field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body, Resource
from engram.kernel.secrets import find_secret

# Used in tool names (`mcp__<name>__<tool>`): lowercase letters, digits and single hyphens, so the
# double underscore that separates the parts can never occur inside a name.
ConnectionName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,22}[a-z0-9])?$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")]
# Headers the MCP transport or HTTP itself sets; an auth header may not replace them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
    }
)
URL_MAX_CHARS = 2048


def secret_context(tenant: str, connection_id: str) -> dict[str, str]:
    """The KMS encryption context of a connection's auth value: its tenant and its connection."""
    return {"tenant": tenant, "connectionId": connection_id}


# Query parameter names that carry a credential (`?token=`, `?api_key=`, `?X-Amz-Signature=`, ...).
_CREDENTIAL_PARAMETER = re.compile(
    r"(?i)(?:^|[^a-z])(?:api_?key|key|(?:access_?|auth_?|id_?|refresh_?)?token|(?:client_?)?secret|passw(?:or)?d|pwd|"
    r"sig|signature|auth|authorization|credentials?|bearer)$"
)


def _credential_parameter(query: str) -> str | None:
    """The first query parameter that names a credential or whose value reads as one."""
    for name, value in parse_qsl(query, keep_blank_values=True):
        if _CREDENTIAL_PARAMETER.search(name) or (value and find_secret(f"{name}={value}")):
            return name
    return None


def check_url(value: str) -> str:
    """A URL of a Streamable HTTP endpoint: http(s), a host, no credentials in it (they go in the
    auth header, which is encrypted; a URL is shown in every list). The egress policy decides
    later whether its scheme and address may be reached from where the stack runs."""
    if len(value) > URL_MAX_CHARS:
        raise ValueError(f"must be at most {URL_MAX_CHARS} characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  # a malformed port raises here
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("must be an http(s) URL with a host, e.g. https://tools.example.com/mcp")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials; put them in authHeader, which is stored encrypted")
    named = _credential_parameter(parts.query)
    if named:
        raise ValueError(
            f"must not carry credentials in its query string ({named}): a URL is shown by GET and the export; "
            'put the credential in authHeader, which is stored encrypted, e.g. {"name": "Authorization", '
            '"value": "Bearer <token>"} or {"name": "X-Api-Key", "value": "<key>"}'
        )
    if any(ch.isspace() or ord(ch) < 0x20 for ch in value):
        raise ValueError("must not contain spaces or control characters")
    return value


class AuthHeader(Body):
    name: HeaderName = "Authorization"
    # A SecretStr: a log line or repr of the request body shows ********** (powertools logs a
    # route's arguments at DEBUG).
    value: Annotated[SecretStr, StringConstraints(min_length=1, max_length=4096)]

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"{name} is set by the MCP transport; use another header")
        return name

    @field_validator("value")
    @classmethod
    def _one_line(cls, value: SecretStr) -> SecretStr:
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value.get_secret_value()):
            raise ValueError("must be one line without control characters")
        return value


class OAuthOptions(Body):
    """OAuth 2.1 instead of a header (TL9): optionally a client the authorization server knows
    Engram by (its id, and its secret, sealed and never returned), and the scopes to ask for
    (default: what the server's metadata names)."""

    client_id: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = None
    client_secret: Annotated[SecretStr, StringConstraints(min_length=1, max_length=4096)] | None = None
    scope: Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=r"^[\x21\x23-\x5B\x5D-\x7E ]+$")] | None = None

    @model_validator(mode="after")
    def _secret_needs_id(self) -> "OAuthOptions":
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("clientSecret needs the clientId it belongs to")
        return self


# A call is bounded by this and by what is left of its turn: a sync turn's 25 s stays the real bound
# there, while a long turn (TURN_BUDGET_SECONDS, up to 870 s) may wait minutes for a slow tool.
TOOL_TIMEOUT_MAX_S = 840


class ConnectionCreate(Body):
    name: ConnectionName
    url: Annotated[str, StringConstraints(min_length=8, max_length=URL_MAX_CHARS)]
    description: Annotated[str, StringConstraints(max_length=500)] = ""
    auth_header: AuthHeader | None = None
    # OAuth instead of the header: `{}` discovers everything from the server (TL9).
    oauth: OAuthOptions | None = None
    timeout_seconds: Annotated[int, Field(ge=1, le=TOOL_TIMEOUT_MAX_S)] = 20

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)

    @model_validator(mode="after")
    def _one_kind_of_auth(self) -> "ConnectionCreate":
        if self.oauth is not None and self.auth_header is not None:
            raise ValueError("a connection authorises with authHeader or with oauth, not both")
        return self


class ConnectionUpdate(Body):
    name: ConnectionName | None = None
    url: Annotated[str, StringConstraints(min_length=8, max_length=URL_MAX_CHARS)] | None = None
    description: Annotated[str, StringConstraints(max_length=500)] | None = None
    # A new value replaces the stored one; null removes it. The value is never returned.
    auth_header: AuthHeader | None = None
    timeout_seconds: Annotated[int, Field(ge=1, le=TOOL_TIMEOUT_MAX_S)] | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)


# --- health (TL8) -----------------------------------------------------------------------------
# A listing or call that fails in one of these ways counts against the server; a tool's own
# is_error, a refused credential or a bad schema do not (they are not the server being down).
COUNTED_FAILURES = frozenset({"unreachable", "timeout", "server_error", "malformed_response"})
FAILURES_TO_COOL = 2  # failures in a row before the server is skipped
COOL_FIRST_S = 30  # the first cool-down; each further failure doubles it...
COOL_MAX_S = 600  # ...up to ten minutes
HealthState = Literal["unknown", "healthy", "degraded", "down"]


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cool_down_s(failures: int) -> int:
    """How long a server that failed `failures` times in a row is skipped (0 below the threshold)."""
    if failures < FAILURES_TO_COOL:
        return 0
    return int(min(COOL_MAX_S, COOL_FIRST_S * 2 ** min(failures - FAILURES_TO_COOL, 10)))


class HealthError(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    code: str
    message: str


class Health(BaseModel):
    """What Engram remembers of a server's last listings and calls, shared by every turn through
    the connection's row. `state`: unknown (never reached), healthy (the last attempt worked),
    degraded (failed lately, still tried), down (failed FAILURES_TO_COOL times in a row: not
    contacted before `retryAfter`, then one listing probes it)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, defer_build=True)

    consecutive_failures: int = 0
    last_success_at: str | None = None
    last_error_at: str | None = None
    last_error: HealthError | None = None
    retry_after: str | None = None  # ISO time; set while the server is down

    @computed_field  # type: ignore[prop-decorator]
    @property
    def state(self) -> HealthState:
        if self.consecutive_failures >= FAILURES_TO_COOL:
            return "down"
        if self.consecutive_failures > 0:
            return "degraded"
        return "healthy" if self.last_success_at else "unknown"

    def cooling(self, now: str) -> bool:
        """Skipped now: down, and its cool-down has not passed."""
        return self.state == "down" and self.retry_after is not None and now < self.retry_after

    def failed(self, error: HealthError, now: datetime) -> "Health":
        failures = self.consecutive_failures + 1
        pause = cool_down_s(failures)
        return self.model_copy(
            update={
                "consecutive_failures": failures,
                "last_error_at": _iso(now),
                "last_error": error,
                "retry_after": _iso(now + timedelta(seconds=pause)) if pause else None,
            }
        )

    def succeeded(self, now: datetime) -> "Health":
        return Health(last_success_at=_iso(now), last_error_at=self.last_error_at, last_error=self.last_error)

    def stored(self) -> dict[str, object]:
        """The row's `health` attribute (without the derived state)."""
        return self.model_dump(by_alias=True, exclude={"state"}, exclude_none=True, mode="json")


def utc_now() -> datetime:
    return datetime.now(UTC)


OAuthState = Literal["needs_authorization", "authorized"]
Registration = Literal["preregistered", "metadata_document", "dynamic"]


class OAuthStatus(BaseModel):
    """What anyone may see of an OAuth connection's grant: whether it is usable, where it came
    from (issuer, registration), what it allows (scope), when it was given."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    status: OAuthState = "needs_authorization"
    issuer: str | None = None
    scope: str | None = None
    registration: Registration | None = None
    client_id: str | None = None
    authorized_at: str | None = None
    # Why it needs (again) an authorization: never granted, expired, revoked by the server.
    reason: str | None = None


class Connection(Resource):
    name: str
    url: str
    description: str = ""
    # The auth header's name; its value is write-only (sealed in the row, never returned).
    auth_header_name: str | None = None
    has_auth: bool = False
    timeout_seconds: int = 20
    health: Health = Field(default_factory=Health)
    # Set for an OAuth connection (TL9): its grant's state, never a token.
    oauth: OAuthStatus | None = None


@dataclass(frozen=True)
class OAuthRow:
    """An OAuth connection's row as the OAuth code needs it: the sealed grant (`sealedAuth`), the
    discovered server and client (JSON, no secret), what the person gave (a client id and its
    sealed secret, the scope to ask for)."""

    connection: Connection
    sealed_tokens: str | None
    server: str | None
    preregistered_client_id: str | None
    requested_scope: str | None
    sealed_client_secret: str | None


class DiscoveredTool(BaseModel):
    """One tool as a server's tools/list gave it (the schema as given, bounded in size)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    # Kept so a call's session need not list the tools again to check a structured result.
    output_schema: dict[str, Any] | None = None


class ToolList(BaseModel):
    """A connection's discovered tools, cached in the table until `expires_at` (epoch seconds)."""

    model_config = ConfigDict(defer_build=True)

    tools: list[DiscoveredTool]
    listed_at: str
    expires_at: int

    def public(self) -> dict[str, object]:
        return {
            "listedAt": self.listed_at,
            "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in self.tools],
        }
