"""/mcp (MX1, MX5): Engram's MCP server for the caller (a sign-in token or an API key).

What the transport's rules decide is answered here, before the SDK loads: GET and DELETE are 405
(the server offers no SSE stream and keeps no session); a browser `Origin` other than the API's
own or the allowed ones (CORS_ALLOW_ORIGINS) is 403; a JSON-RPC batch is refused (MCP dropped
batching in 2025-06-18) with JSON-RPC's Invalid Request.

POST /mcp is not behind API Gateway's authorizer (whose 401 cannot carry a header): it runs the
same checks itself (`apikeys.authorizer.authorize`: API keys, the issuer's JWTs with their
audience, the per-source throttle), so every 401 names the RFC 9728 metadata and the scope in
`WWW-Authenticate`, as MCP authorization (2025-11-25) asks, and a token lacking the scope is a 403
with `error="insufficient_scope"`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Deps, Principal, Reply, principal_of
from engram.apikeys.authorizer import Refused, authorize, source_of
from engram.kernel.errors import EngramError, Forbidden, Unauthorized
from engram.mcp_server import registration

router = Router()

INVALID_REQUEST = -32600  # JSON-RPC 2.0


def _rpc_error(status: int, message: str, *, code: str, field: str, headers: dict[str, str] | None = None) -> Reply:
    """A transport-level refusal as a JSON-RPC error (no id: the request was not read), with the
    REST error's `code` and `field` in `data`."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": message, "data": {"code": code, "field": field}},
    }
    return Response(status_code=status, content_type="application/json", body=json.dumps(body), headers=headers)


def _not_here() -> Reply:
    return _rpc_error(
        405,
        "this MCP server answers POST only: no SSE stream to GET, no session to DELETE (stateless)",
        code="method_not_allowed",
        field="method",
        headers={"Allow": "POST"},
    )


def resource_of(headers: dict[str, str]) -> str:
    """This MCP server's resource identifier (RFC 8707, RFC 9728): its own https URL, from the
    name the request reached (the API's domain in AWS; a loopback name locally, over http)."""
    scheme = headers.get("x-forwarded-proto", "https").split(",")[0].strip() or "https"
    return f"{scheme}://{headers.get('host', '')}/mcp"


@router.get("/.well-known/oauth-protected-resource")
@router.get("/.well-known/oauth-protected-resource/mcp")
def protected_resource(deps: Deps) -> Reply:
    """RFC 9728 Protected Resource Metadata (MX4): which authorization server issues tokens for
    /mcp (the stack's own: its Cognito user pool, or AuthIssuer), with which scopes. MCP clients
    find it from the 401 of /mcp (the path-suffixed form first, then this root form)."""
    headers = {str(k).lower(): str(v) for k, v in (router.current_event.headers or {}).items()}
    settings = deps.settings
    issuer = settings.auth_issuer.rstrip("/")
    if settings.user_pool_id:  # Engram registers clients: it names itself (its RFC 8414 document)
        issuer = resource_of(headers).removesuffix("/mcp")
    metadata = {
        "resource": resource_of(headers),
        "authorization_servers": [issuer] if issuer else [],
        "scopes_supported": settings.required_scopes.split(),
        "bearer_methods_supported": ["header"],
        "resource_name": "Engram",
    }
    return Response(
        status_code=200, content_type="application/json", body=json.dumps(metadata), headers={"Cache-Control": "max-age=300"}
    )


def _json(status: int, body: Mapping[str, object], headers: dict[str, str] | None = None) -> Reply:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body), headers=headers)


@router.get("/.well-known/oauth-authorization-server")
def authorization_server_metadata(deps: Deps) -> Reply:
    """RFC 8414 metadata of Engram as /mcp's authorization server where it registers clients
    (`registration`): Cognito's managed-login endpoints and Engram's registration endpoint."""
    settings = deps.settings
    if not settings.user_pool_id:
        return _json(404, {"error": "not_found", "error_description": registration.NOT_HERE})
    headers = {str(k).lower(): str(v) for k, v in (router.current_event.headers or {}).items()}
    origin = resource_of(headers).removesuffix("/mcp")
    return _json(200, registration.authorization_server(settings, origin), {"Cache-Control": "max-age=300"})


@router.post(registration.REGISTER_PATH)
def register_client(deps: Deps) -> Reply:
    """RFC 7591 dynamic client registration (public: no credential, as the RFC's open registration)."""
    event = router.current_event
    try:
        body = event.json_body
        answer = registration.register(deps.settings, deps.oauth_clients, registration.cognito, body, source_of(event.raw_event))
    except EngramError as err:
        error = {
            "error": err.code,
            "error_description": err.message,
            "code": err.code,
            "message": err.message,
            "field": err.field,
        }
        return _json(err.status, error, {"Cache-Control": "no-store"})
    return _json(201, answer, {"Cache-Control": "no-store"})


@router.get("/mcp")
def mcp_stream() -> Reply:
    return _not_here()


@router.delete("/mcp")
def mcp_end_session() -> Reply:
    return _not_here()


def origin_allowed(origin: str, host: str, allowed: str) -> bool:
    """A request without `Origin` (not a browser) passes; a browser's must be the API's own (its
    `Host`: in AWS API Gateway's name for the API, locally a loopback name, local/apigw.py) or one
    of the allowed origins (comma-separated, `*` any)."""
    if not origin:
        return True
    listed = {o.strip().rstrip("/") for o in allowed.split(",") if o.strip()}
    return "*" in listed or origin.rstrip("/") in listed or (bool(host) and urlsplit(origin).netloc == host)


def _challenge(headers: dict[str, str], scopes: str, error: str = "") -> str:
    metadata = f"{resource_of(headers).removesuffix('/mcp')}/.well-known/oauth-protected-resource/mcp"
    parts = [f'resource_metadata="{metadata}"']
    if scopes:
        parts.append(f'scope="{scopes}"')
    if error:
        parts.append(f'error="{error}"')
    return "Bearer " + ", ".join(parts)


def _caller(deps: Deps, headers: dict[str, str]) -> Principal | Reply:
    """Who calls /mcp, or the 401/403 that says how to sign in."""
    scopes = deps.settings.required_scopes
    try:
        answer = authorize(deps, router.current_event.raw_event)
        context = answer["context"]
        # The key's row was read just now (no gateway cache here): no second read.
        return principal_of(deps, context if isinstance(context, dict) else {}, checked_now=True)
    except (Refused, Unauthorized) as err:
        message = (
            err.message if isinstance(err, Unauthorized) else "a valid bearer token is required: an API key or an access token"
        )
        challenge = {"WWW-Authenticate": _challenge(headers, scopes)}
        return _rpc_error(401, message, code="unauthorized", field="Authorization", headers=challenge)
    except Forbidden as err:
        challenge = {"WWW-Authenticate": _challenge(headers, scopes, "insufficient_scope")}
        return _rpc_error(403, err.message, code=err.code, field="Authorization", headers=challenge)


@router.post("/mcp")
def mcp(deps: Deps) -> Reply:
    event = router.current_event
    headers = {str(k).lower(): str(v) for k, v in (event.headers or {}).items()}
    origin = headers.get("origin", "")
    if not origin_allowed(origin, headers.get("host", ""), deps.settings.cors_allow_origins):
        return _rpc_error(
            403, f"the origin {origin[:200]!r} may not call this MCP server", code="origin_not_allowed", field="Origin"
        )
    raw = (event.decoded_body or "").encode("utf-8")
    if raw.lstrip()[:1] == b"[":
        return _rpc_error(
            400,
            "Invalid Request: JSON-RPC batches are not supported (MCP removed them); send one message per POST",
            code="batch_not_supported",
            field="body",
        )
    who = _caller(deps, headers)
    if not isinstance(who, Principal):
        return who
    from engram.mcp_server import server  # the MCP SDK and starlette only for this route

    status, out, body = server.handle(deps, who, headers, raw)
    content_type = out.pop("content-type", "application/json")
    return Response(status_code=status, content_type=content_type, body=body.decode("utf-8"), headers=out)
