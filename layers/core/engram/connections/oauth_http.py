"""The HTTP side of OAuth connections (TL9): discovery from the MCP server's 401 (RFC 9728), the
authorization server's metadata (RFC 8414, then OIDC discovery), dynamic client registration
(RFC 7591), the token endpoint (code with PKCE, refresh; RFC 8707 `resource` on each) and
revocation (RFC 7009). Every request goes through the egress guard (TL5) and follows no redirect;
answers are read up to 256 KB.

Imported only by the functions that authorise, refresh or revoke (httpx2 stays off the api's cold
start); no token, secret or code is ever logged or put in an error message.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2

from engram.connections.egress import EgressPolicy, EgressRefused, guarded_backend

Json = dict[str, object]
ANSWER_MAX_BYTES = 256 * 1024
TIMEOUT_S = 10.0


class OAuthFailure(Exception):
    """An authorization server or an MCP server answered something Engram cannot use; `code` is
    the OAuth error (`invalid_grant`, ...) or one of Engram's (`discovery_failed`, ...)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Json:
        try:
            value = json.loads(self.body)
        except ValueError:
            raise OAuthFailure("malformed_response", "the server's answer is not JSON") from None
        if not isinstance(value, dict):
            raise OAuthFailure("malformed_response", "the server's answer is not a JSON object")
        return value


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per container (loading the CA bundle costs ~20 ms a request)."""
    return httpx2.create_ssl_context()


class _Transport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over the egress-guarded backend; the URL of every request checked."""

    def __init__(self, policy: EgressPolicy):
        super().__init__(verify=_ssl_context(), trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=guarded_backend(policy), max_connections=4
        )
        self._policy = policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._policy.check_url(str(request.url))
        return await super().handle_async_request(request)


@dataclass(frozen=True)
class Body:
    """What a request sends: a JSON document, or a form; headers; HTTP Basic credentials."""

    json: Json | None = None
    form: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    basic: tuple[str, str] | None = None


async def _send(policy: EgressPolicy, method: str, url: str, body: Body) -> Answer:
    async with (
        httpx2.AsyncClient(transport=_Transport(policy), timeout=TIMEOUT_S, follow_redirects=False) as http,
        http.stream(method, url, json=body.json, data=body.form, headers=body.headers, auth=body.basic) as response,
    ):
        read = b""
        async for chunk in response.aiter_bytes():
            read += chunk
            if len(read) > ANSWER_MAX_BYTES:
                raise OAuthFailure("too_large", f"the answer of {urlsplit(url).netloc} passed {ANSWER_MAX_BYTES} bytes")
        return Answer(response.status_code, dict(response.headers), read)


def _run[T](make: Callable[[], Awaitable[T]]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(make)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-oauth") as pool:
        return pool.submit(anyio.run, make).result()


def request(policy: EgressPolicy, method: str, url: str, body: Body | None = None) -> Answer:
    """One request, its answer read (bounded); network failures as OAuthFailure `unreachable`."""
    try:
        return _run(lambda: _send(policy, method, url, body or Body()))
    except (OAuthFailure, EgressRefused):
        raise
    except httpx2.TimeoutException:
        raise OAuthFailure("timeout", f"{urlsplit(url).netloc} did not answer in time") from None
    except (httpx2.HTTPError, OSError):
        raise OAuthFailure("unreachable", f"{urlsplit(url).netloc} could not be reached") from None


# --- discovery ----------------------------------------------------------------------------------
def _challenge_field(header: str, name: str) -> str | None:
    match = re.search(rf'{name}=(?:"([^"]*)"|([^\s,]+))', header)
    return (match.group(1) or match.group(2)) if match else None


@dataclass(frozen=True)
class Challenge:
    """What the MCP server's 401 says: where its protected resource metadata is, which scope."""

    resource_metadata: str | None
    scope: str | None


def challenge(policy: EgressPolicy, server_url: str) -> Challenge:
    """POSTs an initialize without a token: a server that wants OAuth answers 401 with a
    `WWW-Authenticate: Bearer resource_metadata=..., scope=...` challenge."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "engram", "version": "1"}},
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    answer = request(policy, "POST", server_url, Body(json=body, headers=headers))
    header = answer.headers.get("www-authenticate", "")
    if answer.status not in (401, 403):
        return Challenge(None, None)
    return Challenge(_challenge_field(header, "resource_metadata"), _challenge_field(header, "scope"))


def resource_metadata_urls(found: str | None, server_url: str) -> list[str]:
    """Where the protected resource metadata may be (RFC 9728; MCP 2025-11-25): the challenge's
    URL, then the path-based well-known URL, then the root one."""
    parts = urlsplit(server_url)
    base = f"{parts.scheme}://{parts.netloc}"
    urls = [found] if found else []
    if parts.path and parts.path != "/":
        urls.append(f"{base}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}")
    urls.append(f"{base}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 then OIDC discovery, path-aware as the MCP spec orders them."""
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{base}/.well-known/oauth-authorization-server{path}",
            f"{base}/.well-known/openid-configuration{path}",
            f"{base}{path}/.well-known/openid-configuration",
        ]
    return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]


def first_json(policy: EgressPolicy, urls: list[str], what: str) -> tuple[str, Json]:
    """The first of `urls` that answers 200 with a JSON object."""
    for url in urls:
        try:
            answer = request(policy, "GET", url, Body(headers={"accept": "application/json"}))
        except (OAuthFailure, EgressRefused):  # unreachable, or an address the policy refuses: the next
            continue
        if answer.status == 200:
            try:
                return url, answer.json()
            except OAuthFailure:
                continue
    raise OAuthFailure("discovery_failed", f"no {what} was found (tried {', '.join(urls)})")


@dataclass(frozen=True)
class Discovery:
    resource: str
    scope: str | None
    metadata: Json  # the authorization server's


def discover(policy: EgressPolicy, server_url: str) -> Discovery:
    """The MCP server's resource and authorization server, and that server's metadata."""
    found = challenge(policy, server_url)
    _, resource_doc = first_json(
        policy, resource_metadata_urls(found.resource_metadata, server_url), "protected resource metadata"
    )
    servers = resource_doc.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise OAuthFailure("discovery_failed", "the protected resource metadata names no authorization server")
    resource = resource_doc.get("resource")
    if not isinstance(resource, str) or not _same_origin(resource, server_url):
        raise OAuthFailure("discovery_failed", "the protected resource metadata names a resource of another origin")
    issuer = servers[0]
    _, metadata = first_json(policy, server_metadata_urls(issuer), "authorization server metadata")
    if metadata.get("issuer") != issuer:
        raise OAuthFailure("discovery_failed", "the authorization server's metadata names another issuer")
    for name in ("authorization_endpoint", "token_endpoint"):
        if not isinstance(metadata.get(name), str):
            raise OAuthFailure("discovery_failed", f"the authorization server's metadata has no {name}")
    methods = metadata.get("code_challenge_methods_supported")
    if not isinstance(methods, list) or "S256" not in methods:
        raise OAuthFailure("discovery_failed", "the authorization server does not offer PKCE with S256, which OAuth 2.1 requires")
    scopes = resource_doc.get("scopes_supported")
    scope = found.scope or (" ".join(str(s) for s in scopes) if isinstance(scopes, list) and scopes else None)
    return Discovery(resource=resource, scope=scope, metadata=metadata)


def _same_origin(a: str, b: str) -> bool:
    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.netloc) == (y.scheme, y.netloc)


def register(policy: EgressPolicy, endpoint: str, *, redirect_uri: str, scope: str | None) -> Json:
    """RFC 7591: Engram as a public client (PKCE; no secret to keep) for its redirect URI."""
    document: Json = {
        "client_name": "Engram",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    if scope:
        document["scope"] = scope
    answer = request(policy, "POST", endpoint, Body(json=document, headers={"accept": "application/json"}))
    if answer.status not in (200, 201):
        raise OAuthFailure("registration_failed", f"the authorization server refused the registration (HTTP {answer.status})")
    client = answer.json()
    if not isinstance(client.get("client_id"), str):
        raise OAuthFailure("registration_failed", "the registration answer has no client_id")
    return client


@dataclass(frozen=True)
class ClientAuth:
    """How Engram authenticates to the token and revocation endpoints as its client."""

    client_id: str
    secret: str | None = None
    method: str = "none"  # none | client_secret_basic | client_secret_post

    def body(self, form: dict[str, str]) -> Body:
        """The form with the client in it (or as HTTP Basic credentials)."""
        if self.method == "client_secret_basic" and self.secret is not None:
            return Body(form=form, headers={"accept": "application/json"}, basic=(self.client_id, self.secret))
        form = {**form, "client_id": self.client_id}
        if self.method == "client_secret_post" and self.secret is not None:
            form["client_secret"] = self.secret
        return Body(form=form, headers={"accept": "application/json"})


def token(policy: EgressPolicy, endpoint: str, form: dict[str, str], client: ClientAuth) -> Json:
    """A token request; the answer's JSON, or OAuthFailure with the server's `error` code."""
    answer = request(policy, "POST", endpoint, client.body(form))
    body = answer.json()
    if answer.status != 200:
        code = str(body.get("error") or "token_request_failed")[:64]
        raise OAuthFailure(code, f"the authorization server refused the token request ({code}, HTTP {answer.status})")
    if not isinstance(body.get("access_token"), str) or str(body.get("token_type", "")).lower() not in ("bearer", ""):
        raise OAuthFailure("malformed_response", "the token answer has no bearer access_token")
    return body


def revoke(policy: EgressPolicy, endpoint: str, value: str, hint: str, client: ClientAuth) -> bool:
    """RFC 7009; True when the server took it (200)."""
    return request(policy, "POST", endpoint, client.body({"token": value, "token_type_hint": hint})).status == 200
