"""MX4 end to end with the stack's own user pool, emulated (issue 35): an MCP client finds
Engram's registration endpoint from /mcp's 401, registers itself (RFC 7591, onto a Cognito app
client in moto's cognito-idp), signs a user in with that client, and lists and calls tools with
the official MCP client; the authorizer checks the token's signature against the pool's JWKS,
which moto serves on loopback (AUTH_JWKS_URL). A registration unused past its time, then swept,
no longer lets its tokens in.

What moto cannot do: Cognito's managed login (the /oauth2/authorize and /oauth2/token pages) is
not emulated, so the code + PKCE exchange cannot run here; the token comes from
AdminInitiateAuth with the registered client's id, which mints the same access token (the
client's `client_id`, no `aud`, the pool's issuer and scope). The code flow itself runs against
a real authorization server in tests/e2e/test_mcp_oauth_local.py."""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from typing import Any

import boto3
import httpx2
import pytest
from mcp import Client

from local.stack import start_stack
from tests.e2e.test_mcp_server_http import session

USER, PASSWORD = "ada@example.com", "Correct-horse-42"
REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture(scope="module")
def stack():
    handle = start_stack(port=0, model_provider="offline", retry_delay=1, user_pool=True)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def idp(stack):
    client = boto3.client(
        "cognito-idp",
        region_name="us-east-1",
        endpoint_url=stack.moto_url,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    pool = stack.resources.user_pool()
    client.admin_create_user(UserPoolId=pool, Username=USER, TemporaryPassword="Temporary-pass-1")
    client.admin_set_user_password(UserPoolId=pool, Username=USER, Password=PASSWORD, Permanent=True)
    return client


def _register(url: str) -> str:
    """What an MCP client does unaided: /mcp's 401 names the resource metadata, which names the
    authorization server, whose metadata names the registration endpoint."""
    with httpx2.Client(timeout=30) as http:
        refused = http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        metadata_url = re.search(r'resource_metadata="([^"]+)"', refused.headers["www-authenticate"]).group(1)
        issuer = http.get(metadata_url).json()["authorization_servers"][0]
        server = http.get(f"{issuer}/.well-known/oauth-authorization-server").json()
        made = http.post(
            server["registration_endpoint"],
            json={
                "client_name": "an MCP client",
                "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": "none",
            },
        )
    assert made.status_code == 201, made.text
    return str(made.json()["client_id"])


def _token(idp: Any, pool: str, client_id: str) -> str:
    answer = idp.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": USER, "PASSWORD": PASSWORD},
    )
    return str(answer["AuthenticationResult"]["AccessToken"])


def _claims(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


def _mcp_status(url: str, token: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx2.post(f"{url}/mcp", json=body, headers=headers, timeout=30)


def test_a_registered_client_signs_in_lists_and_calls_tools(stack, idp):
    url = stack.url.rstrip("/")
    client_id = _register(url)
    assert client_id not in stack.env["AUTH_AUDIENCE"].split(",")  # known only by its registration
    token = _token(idp, stack.resources.user_pool(), client_id)
    claims = _claims(token)
    assert claims["client_id"] == client_id and "aud" not in claims and claims["iss"] == stack.env["AUTH_ISSUER"]

    async def steps(client: Client) -> dict[str, Any]:
        tools = await client.list_tools()
        remembered = await client.call_tool("remember", {"fact": "I signed in with a registered client"})
        listed = await client.call_tool("list_facts", {})
        return {"tools": tools, "remembered": remembered, "listed": listed}

    out = session(url, token, steps)  # the official client, the token as its bearer
    assert {t.name for t in out["tools"].tools} >= {"remember", "list_facts", "forget"}
    assert not out["remembered"].is_error, out["remembered"]
    assert [f["fact"] for f in out["listed"].structured_content["items"]] == ["I signed in with a registered client"]
    # The same person over REST (the gateway's authorizer, the same JWT rules): the same facts.
    rest = httpx2.get(f"{url}/api/me/facts", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert rest.status_code == 200, rest.text
    assert [f["fact"] for f in rest.json()["data"]["items"]] == ["I signed in with a registered client"]


def test_a_token_of_an_expired_then_swept_registration_is_refused(stack, idp, monkeypatch):
    url = stack.url.rstrip("/")
    pool = stack.resources.user_pool()
    used, unused = _register(url), _register(url)
    used_token, unused_token = _token(idp, pool, used), _token(idp, pool, unused)
    assert _mcp_status(url, used_token).status_code == 200  # its first use: it no longer expires

    # A day on (REGISTRATION_UNUSED_SECONDS): the unused registration has expired.
    clients = sys.modules["engram.apikeys.oauth_clients"]  # the stack's copy of the core
    ahead = int(stack.env.get("REGISTRATION_UNUSED_SECONDS") or 86_400) + 5
    monkeypatch.setattr(clients, "_now", lambda: int(time.time()) + ahead)
    refused = _mcp_status(url, unused_token)
    assert refused.status_code == 401, refused.text
    assert "resource_metadata=" in refused.headers["www-authenticate"]

    swept = stack.functions["HeartbeatFunction"].invoke({"source": "engram.sweep"})
    assert swept["oauthClientsDeleted"] == 1
    with pytest.raises(idp.exceptions.ResourceNotFoundException):
        idp.describe_user_pool_client(UserPoolId=pool, ClientId=unused)
    assert _mcp_status(url, unused_token).status_code == 401  # deleted: still refused
    assert _mcp_status(url, used_token).status_code == 200  # the used one is kept
