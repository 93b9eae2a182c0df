"""RFC 7591 dynamic client registration onto Cognito app clients (issue 35, item 1; MX4), against
moto's cognito-idp and DynamoDB: a registration makes a public PKCE app client in the stack's pool,
redirect URIs outside the allowlist, a full stack and a busy source are refused with nothing made,
and the sweeper deletes the Cognito client of a registration never used. Locally (no pool of the
stack's own) the endpoint says the loopback authorization server registers clients itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from engram.apikeys import oauth_clients
from engram.kernel.settings import get_settings
from engram.roots import heartbeat

CLAUDE = "https://claude.ai/api/mcp/auth_callback"
REGISTER = "/api/oauth/register"


def _rebuild(stack: Any) -> None:
    get_settings.cache_clear()
    stack.deps = heartbeat.build(get_settings())
    stack.use(stack.deps)


@pytest.fixture
def pool(moto_stack: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, str]]:
    """The moto stack with a Cognito user pool of its own (as deployed without AuthIssuer)."""
    idp = boto3.client("cognito-idp")
    pool_id = idp.create_user_pool(PoolName="engram")["UserPool"]["Id"]
    monkeypatch.setenv("USER_POOL_ID", pool_id)
    monkeypatch.setenv("CONSOLE_LOGIN_URL", "https://engram-login.auth.us-east-1.amazoncognito.com")
    _rebuild(moto_stack)
    yield moto_stack, idp, pool_id


def _register(stack: Any, **fields: Any) -> Any:
    body = {"client_name": "Claude", "redirect_uris": [CLAUDE], "token_endpoint_auth_method": "none", **fields}
    return stack.call("POST", REGISTER, user=None, body=body)


def _clients(idp: Any, pool_id: str) -> list[str]:
    return [c["ClientId"] for c in idp.list_user_pool_clients(UserPoolId=pool_id, MaxResults=60)["UserPoolClients"]]


def test_a_registration_makes_a_public_pkce_client_in_the_pool(pool):
    stack, idp, pool_id = pool
    r = _register(
        stack, redirect_uris=[CLAUDE, "http://127.0.0.1:33418/callback"], grant_types=["authorization_code", "refresh_token"]
    )
    assert r.status == 201, r.body
    assert r.headers.get("cache-control") == "no-store"
    client_id = r.body["client_id"]
    assert r.body["redirect_uris"] == [CLAUDE, "http://127.0.0.1:33418/callback"]
    assert r.body["token_endpoint_auth_method"] == "none" and "client_secret" not in r.body
    assert abs(r.body["client_id_issued_at"] - time.time()) < 60
    made = idp.describe_user_pool_client(UserPoolId=pool_id, ClientId=client_id)["UserPoolClient"]
    assert "ClientSecret" not in made
    assert made["CallbackURLs"] == [CLAUDE, "http://127.0.0.1:33418/callback"]
    assert made["AllowedOAuthFlows"] == ["code"]
    assert set(made["AllowedOAuthScopes"]) >= {"openid", "aws.cognito.signin.user.admin"}
    # the authorizer knows it (its tokens carry client_id), and it is kept once used
    assert stack.deps.oauth_clients.registered(client_id)
    assert not stack.deps.oauth_clients.registered("not-a-registered-client")


def test_the_metadata_names_engram_as_the_authorization_server_with_its_registration_endpoint(pool):
    stack, _, _ = pool
    resource = stack.call("GET", "/.well-known/oauth-protected-resource/mcp", user=None)
    assert resource.status == 200
    origin = resource.body["resource"].removesuffix("/mcp")
    assert resource.body["authorization_servers"] == [origin]
    server = stack.call("GET", "/.well-known/oauth-authorization-server", user=None)
    assert server.status == 200, server.body
    assert server.body["issuer"] == origin
    assert server.body["registration_endpoint"] == origin + REGISTER
    assert server.body["authorization_endpoint"] == "https://engram-login.auth.us-east-1.amazoncognito.com/oauth2/authorize"
    assert server.body["token_endpoint"] == "https://engram-login.auth.us-east-1.amazoncognito.com/oauth2/token"
    assert server.body["code_challenge_methods_supported"] == ["S256"]


@pytest.mark.parametrize(
    ("uris", "field", "error"),
    [
        (["https://evil.example/callback"], "redirect_uris", "invalid_redirect_uri"),
        ([CLAUDE, "https://claude.ai.evil.example/api/mcp/auth_callback"], "redirect_uris", "invalid_redirect_uri"),
        (["https://127.0.0.1:8080/callback"], "redirect_uris", "invalid_redirect_uri"),  # loopback is http only
        (["http://localhost.evil.example:8080/callback"], "redirect_uris", "invalid_redirect_uri"),
        (["http://127.0.0.1:9/cb#frag"], "redirect_uris", "invalid_redirect_uri"),
        ([], "redirect_uris", "invalid_client_metadata"),
    ],
)
def test_a_redirect_uri_off_the_allowlist_is_refused_and_nothing_is_made(pool, uris, field, error):
    stack, idp, pool_id = pool
    r = _register(stack, redirect_uris=uris)
    assert r.status == 400, r.body
    assert (r.body["error"], r.body["field"]) == (error, field)
    assert r.body["error_description"]
    assert _clients(idp, pool_id) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"token_endpoint_auth_method": "client_secret_basic"}, "token_endpoint_auth_method"),
        ({"grant_types": ["client_credentials"]}, "grant_types"),
        ({"grant_types": ["refresh_token"]}, "grant_types"),
        ({"client_name": "x" * 101}, "client_name"),
        ({"redirect_uris": "http://127.0.0.1:9/cb"}, "redirect_uris"),
        # wrong JSON types, never coerced (the strict-bodies test's cases for this route, which
        # needs a user pool: test_strict_bodies runs on a stack without one)
        ({"client_name": 5}, "client_name"),
        ({"client_name": True}, "client_name"),
        ({"client_name": 1.5}, "client_name"),
        ({"token_endpoint_auth_method": 0}, "token_endpoint_auth_method"),
        ({"token_endpoint_auth_method": True}, "token_endpoint_auth_method"),
    ],
)
def test_bad_client_metadata_is_a_400_naming_the_field(pool, fields, field):
    stack, idp, pool_id = pool
    r = _register(stack, **fields)
    assert r.status == 400, r.body
    assert (r.body["error"], r.body["field"]) == ("invalid_client_metadata", field)
    assert _clients(idp, pool_id) == []


def test_a_body_that_is_not_json_is_a_400(pool):
    stack, idp, pool_id = pool
    r = stack.call("POST", REGISTER, user=None, raw="{not json")
    assert r.status == 400 and r.body["field"] == "body", r.body
    assert _clients(idp, pool_id) == []


@pytest.mark.parametrize(
    ("setting", "status", "error", "words"),
    [
        ("REGISTRATIONS_PER_SOURCE_HOUR", 429, "too_many_registrations", "per address and hour"),
        ("REGISTERED_CLIENTS_MAX", 409, "quota_exceeded", "REGISTERED_CLIENTS_MAX"),
    ],
)
def test_registrations_stop_at_the_per_source_rate_and_the_stack_quota(pool, monkeypatch, setting, status, error, words):
    stack, idp, pool_id = pool
    monkeypatch.setenv(setting, "2")
    _rebuild(stack)
    assert [_register(stack).status for _ in range(3)] == [201, 201, status]
    refused = _register(stack)
    assert refused.body["error"] == error and words in refused.body["error_description"], refused.body
    assert len(_clients(idp, pool_id)) == 2  # nothing made for the refused ones


def test_the_sweeper_deletes_the_cognito_client_of_a_registration_never_used(pool, monkeypatch):
    stack, idp, pool_id = pool
    unused = _register(stack).body["client_id"]
    used = _register(stack, client_name="Claude Code", redirect_uris=["http://localhost:8976/callback"]).body["client_id"]
    assert stack.deps.oauth_clients.registered(used)  # its first token, seen by the authorizer

    def sweep() -> dict[str, Any]:
        return stack.functions["HeartbeatFunction"].invoke({"source": "engram.sweep"})

    assert sweep()["oauthClientsDeleted"] == 0  # not yet expired
    ahead = stack.deps.settings.registration_unused_s + 5
    monkeypatch.setattr(oauth_clients, "_now", lambda: int(time.time()) + ahead)
    assert not stack.deps.oauth_clients.registered(unused)  # expired: its tokens are refused before the sweep too
    result = sweep()
    assert result["oauthClientsDeleted"] == 1 and result["swept"] == 0
    assert _clients(idp, pool_id) == [used]
    with pytest.raises(idp.exceptions.ResourceNotFoundException):
        idp.describe_user_pool_client(UserPoolId=pool_id, ClientId=unused)
    assert not stack.deps.oauth_clients.registered(unused)  # its tokens are no longer accepted
    assert sweep()["oauthClientsDeleted"] == 0  # once


def test_a_cognito_client_already_gone_is_still_swept(pool, monkeypatch):
    stack, idp, pool_id = pool
    client_id = _register(stack).body["client_id"]
    idp.delete_user_pool_client(UserPoolId=pool_id, ClientId=client_id)  # by hand, say
    ahead = stack.deps.settings.registration_unused_s + 5
    monkeypatch.setattr(oauth_clients, "_now", lambda: int(time.time()) + ahead)
    assert stack.functions["HeartbeatFunction"].invoke({"source": "engram.sweep"})["oauthClientsDeleted"] == 1
    assert not stack.deps.oauth_clients.registered(client_id)


def test_locally_registration_is_the_loopback_authorization_servers(stack):
    r = stack.call("POST", REGISTER, user=None, body={"redirect_uris": ["http://127.0.0.1:9/cb"]})
    assert r.status == 404, r.body
    assert r.body["error"] == "registration_not_offered" and "loopback authorization server" in r.body["error_description"]
    assert stack.call("GET", "/.well-known/oauth-authorization-server", user=None).status == 404
    assert stack.functions["HeartbeatFunction"].invoke({"source": "engram.sweep"}) == {"swept": 0}
