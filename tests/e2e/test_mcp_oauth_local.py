"""MX4 locally: the MCP SDK's own OAuth client provider (mcp.client.auth) signs in to Engram's
/mcp against a real authorization server on loopback (oidc-provider, tests/oauth) and lists and
calls tools: discovery from the 401 through RFC 9728's metadata, dynamic registration (RFC 7591),
PKCE, a token bound to /mcp (RFC 8707 resource), the call. A token issued for another resource
is refused; a revoked refresh token gets nothing more.

The stack runs with the authorization server as its issuer (AUTH_ISSUER) and /mcp as its
audience (AUTH_AUDIENCE), as a deployment with AuthIssuer would; the token's scope is what
REQUIRED_SCOPES asks."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import urllib.parse
import urllib.request
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from local.stack import start_stack
from tests.e2e.test_mcp_server_http import on_own_thread
from tests.oauth.fixture import AuthorizationServer, free_port

SCOPE = "engram"
REDIRECT = "http://127.0.0.1:9/callback"  # never opened: the browser stops at it (sign_in)


@pytest.fixture(scope="module")
def oauth(monkeypatch_module):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    other = "http://127.0.0.1:9/mcp"
    server = AuthorizationServer.start(resources=[{"resource": resource, "scope": SCOPE}, {"resource": other, "scope": SCOPE}])
    monkeypatch_module.setenv("AUTH_ISSUER", server.issuer)
    monkeypatch_module.setenv("AUTH_AUDIENCE", resource)
    monkeypatch_module.setenv("REQUIRED_SCOPES", SCOPE)
    stack = start_stack(port=port, model_provider="offline", retry_delay=1)
    try:
        yield {"url": stack.url.rstrip("/"), "issuer": server.issuer, "resource": resource, "other": other, "server": server}
    finally:
        stack.stop()
        server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


class _Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_sdks_oauth_client_signs_in_lists_and_calls_tools(oauth):
    storage = _Memory()
    redirected: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        # What the person's browser does; the authorization server's pages finish by themselves.
        redirected.append(await anyio.to_thread.run_sync(lambda: oauth["server"].sign_in(authorization_url, stop_at=REDIRECT)))

    async def callback_handler() -> AuthorizationCodeResult:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(redirected[-1]).query))
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    provider = OAuthClientProvider(
        f"{oauth['url']}/mcp",
        OAuthClientMetadata(
            client_name="engram-oauth-test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def main() -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http_client,
            Client(streamable_http_client(f"{oauth['url']}/mcp", http_client=http_client), raise_exceptions=True) as client,
        ):
            tools = await client.list_tools()
            remembered = await client.call_tool("remember", {"fact": "I sign in with OAuth"})
            listed = await client.call_tool("list_facts", {})
            return {"tools": tools, "remembered": remembered, "listed": listed}

    out = on_own_thread(main)
    assert {t.name for t in out["tools"].tools} >= {"remember", "list_facts"}
    assert not out["remembered"].is_error
    assert [f["fact"] for f in out["listed"].structured_content["items"]] == ["I sign in with OAuth"]
    assert storage.client is not None and storage.client.client_id  # registered dynamically (RFC 7591)
    claims = json.loads(base64.urlsafe_b64decode(storage.tokens.access_token.split(".")[1] + "=="))
    assert claims["aud"] == oauth["resource"] and claims["iss"] == oauth["issuer"]
    assert [e["kind"] for e in oauth["server"].events("registration")] == ["registration"]


def _token_for(oauth: dict[str, Any], resource: str) -> dict[str, Any]:
    """An authorization-code grant with PKCE for `resource`, by hand (a client of another resource)."""
    issuer = oauth["issuer"]
    with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=10) as answer:
        meta = json.loads(answer.read())
    body = json.dumps({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
                       "grant_types": ["authorization_code", "refresh_token"], "scope": f"{SCOPE} offline_access"}).encode()  # fmt: skip
    request = urllib.request.Request(meta["registration_endpoint"], data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        client_id = json.loads(answer.read())["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": f"{SCOPE} offline_access",
             "resource": resource, "code_challenge": challenge, "code_challenge_method": "S256", "state": "s",
             "prompt": "consent"}  # fmt: skip
    final = oauth["server"].sign_in(f"{meta['authorization_endpoint']}?{urllib.parse.urlencode(query)}", stop_at=REDIRECT)
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(final).query))["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": resource}  # fmt: skip
    with urllib.request.urlopen(
        urllib.request.Request(meta["token_endpoint"], data=urllib.parse.urlencode(form).encode()), timeout=10
    ) as answer:
        return {**json.loads(answer.read()), "client_id": client_id, "meta": meta}


def _mcp_status(url: str, token: str) -> int:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    request = urllib.request.Request(f"{url}/mcp", data=json.dumps(init).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code


def test_the_401_names_the_metadata_and_the_scope(oauth):
    request = urllib.request.Request(
        f"{oauth['url']}/mcp", data=b"{}", method="POST", headers={"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    challenge = refused.value.headers["WWW-Authenticate"]
    assert challenge == f'Bearer resource_metadata="{oauth["url"]}/.well-known/oauth-protected-resource/mcp", scope="{SCOPE}"'
    with urllib.request.urlopen(f"{oauth['url']}/.well-known/oauth-protected-resource/mcp", timeout=10) as answer:
        document = json.loads(answer.read())
    assert document["authorization_servers"] == [oauth["issuer"]] and document["scopes_supported"] == [SCOPE]


def test_a_token_for_another_resource_is_refused_and_ours_passes(oauth):
    assert _mcp_status(oauth["url"], _token_for(oauth, oauth["other"])["access_token"]) == 401
    assert _mcp_status(oauth["url"], _token_for(oauth, oauth["resource"])["access_token"]) == 200


def test_a_revoked_refresh_token_gets_no_new_access_token(oauth):
    grant = _token_for(oauth, oauth["resource"])
    meta, refresh = grant["meta"], grant["refresh_token"]
    revoke = {"token": refresh, "token_type_hint": "refresh_token", "client_id": grant["client_id"]}
    with urllib.request.urlopen(
        urllib.request.Request(meta["revocation_endpoint"], data=urllib.parse.urlencode(revoke).encode()), timeout=10
    ):
        pass
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh,
        "client_id": grant["client_id"],
        "resource": oauth["resource"],
    }
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(meta["token_endpoint"], data=urllib.parse.urlencode(form).encode()), timeout=10
        )
    assert refused.value.code == 400 and json.loads(refused.value.read())["error"] == "invalid_grant"
