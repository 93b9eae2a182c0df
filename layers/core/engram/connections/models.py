"""Connections to remote MCP servers: request bodies, the public resource, discovered tools."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints, field_validator

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


# A call is bounded by this and by what is left of its turn: a sync turn's 25 s stays the real bound
# there, while a long turn (TURN_BUDGET_SECONDS, up to 870 s) may wait minutes for a slow tool.
TOOL_TIMEOUT_MAX_S = 840


class ConnectionCreate(Body):
    name: ConnectionName
    url: Annotated[str, StringConstraints(min_length=8, max_length=URL_MAX_CHARS)]
    description: Annotated[str, StringConstraints(max_length=500)] = ""
    auth_header: AuthHeader | None = None
    timeout_seconds: Annotated[int, Field(ge=1, le=TOOL_TIMEOUT_MAX_S)] = 20

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)


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


class Connection(Resource):
    name: str
    url: str
    description: str = ""
    # The auth header's name; its value is write-only (sealed in the row, never returned).
    auth_header_name: str | None = None
    has_auth: bool = False
    timeout_seconds: int = 20


class DiscoveredTool(BaseModel):
    """One tool as a server's tools/list gave it (the schema as given, bounded in size)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    # Kept so a call's session need not list the tools again to check a structured result.
    output_schema: dict[str, Any] | None = None


class ToolList(BaseModel):
    """A connection's discovered tools, cached in the table until `expires_at` (epoch seconds)."""

    tools: list[DiscoveredTool]
    listed_at: str
    expires_at: int

    def public(self) -> dict[str, object]:
        return {
            "listedAt": self.listed_at,
            "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in self.tools],
        }
