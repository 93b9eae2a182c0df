"""OAuth connections (TL9) in the core, against a real authorization server (oidc-provider,
tests/oauth) and real MCP servers on loopback, the handlers on the AWS fakes: the client Engram
picks (a Client ID Metadata Document, registration, none possible), discovery that fails, bad
requests, and several functions refreshing one grant at once (one refresh; a server that rotates
refresh tokens would end the grant on a reused one)."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from engram.connections import oauth
from engram.connections.tools import OPENED
from engram.kernel.ids import tenant_key
from tests.oauth.fixture import AuthorizationServer, free_port, protected_mcp_server

BASE = "http://127.0.0.1:9"  # the API as the person's browser would reach it (never opened here)
TENANT = tenant_key("alice")


@pytest.fixture
def protected() -> Iterator[Any]:
    """A factory: an authorization server (options as given) and an MCP server that trusts it."""
    started: list[Any] = []

    def start(ttl: int = 600, **options: Any) -> tuple[AuthorizationServer, Any]:
        port = free_port()
        issuer = AuthorizationServer.start(
            resources=[{"resource": f"http://127.0.0.1:{port}/mcp", "scope": "tools", "ttl": ttl}], **options
        )
        mcp = protected_mcp_server(issuer.issuer, port)
        started.extend([mcp, issuer])
        return issuer, mcp

    yield start
    for thing in started:
        thing.stop()


def _connection(stack, url: str, **oauth_options: Any) -> str:
    r = stack.call("POST", "/api/connections", body={"name": "desk", "url": url, "oauth": oauth_options})
    assert r.status == 201, r.body
    return str(r.data["id"])


def _authorize(stack, issuer: AuthorizationServer, connection_id: str) -> None:
    started = oauth.start(stack.deps, TENANT, connection_id, BASE)
    back = issuer.sign_in(str(started["authorizationUrl"]), stop_at=BASE + oauth.CALLBACK_PATH)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(back).query))
    oauth.finish(stack.deps, query.get("state"), query.get("code"), query.get("error"), query.get("iss"))


def test_a_client_id_metadata_document_is_used_where_the_server_takes_one(stack, protected):
    issuer, mcp = protected(client_id_metadata_documents=True)
    conn = _connection(stack, mcp.url)
    row = stack.deps.connections.oauth_row(TENANT, conn)
    server = oauth.prepare(stack.deps, TENANT, row, "https://engram.example")
    assert server.registration == "metadata_document"
    assert server.client_id == "https://engram.example/api/connections/oauth/client-metadata.json"
    assert oauth.client_metadata_document("https://engram.example")["redirect_uris"] == [
        "https://engram.example/api/connections/oauth/callback"
    ]
    assert issuer.events("registration") == []
    # Over http (the local stack) the draft's https client id is impossible: registration instead.
    server = oauth.prepare(stack.deps, TENANT, stack.deps.connections.oauth_row(TENANT, conn), BASE)
    assert server.registration == "dynamic" and len(issuer.events("registration")) == 1
    # A second start for the same issuer and redirect URI reuses the registered client.
    again = oauth.prepare(stack.deps, TENANT, stack.deps.connections.oauth_row(TENANT, conn), BASE)
    assert again.client_id == server.client_id and len(issuer.events("registration")) == 1


def test_a_server_that_offers_no_way_to_register_says_what_to_do(stack, protected):
    issuer, mcp = protected(registration=False)
    conn = _connection(stack, mcp.url)
    r = stack.call("POST", f"/api/connections/{conn}/oauth/start")
    assert r.status == 400 and r.error["code"] == "oauth_no_client", r.body
    assert "clientId" in r.error["message"]


def test_a_server_without_oauth_metadata_fails_discovery_by_name(stack):
    from local.sample_mcp import start

    plain = start()
    try:
        conn = _connection(stack, plain.url)
        r = stack.call("POST", f"/api/connections/{conn}/oauth/start")
        assert r.status == 400 and r.error["code"] == "oauth_discovery_failed", r.body
        assert "protected resource metadata" in r.error["message"]
    finally:
        plain.stop()


def test_bad_oauth_requests_are_refused_by_name(stack, protected):
    _, mcp = protected()
    both = {"name": "x", "url": mcp.url, "oauth": {}, "authHeader": {"value": "Bearer y"}}
    r = stack.call("POST", "/api/connections", body=both)
    assert r.status == 400 and "not both" in r.error["message"]
    r = stack.call("POST", "/api/connections", body={"name": "x", "url": mcp.url, "oauth": {"clientSecret": "s"}})
    assert r.status == 400 and "clientId" in r.error["message"]
    header = stack.call("POST", "/api/connections", body={"name": "plain", "url": mcp.url}).data["id"]
    r = stack.call("POST", f"/api/connections/{header}/oauth/start")
    assert r.status == 400 and r.error["code"] == "not_oauth"
    conn = _connection(stack, mcp.url)
    r = stack.call("PATCH", f"/api/connections/{conn}", body={"authHeader": {"value": "Bearer y"}})
    assert r.status == 400 and r.error["code"] == "not_header_auth"
    assert stack.call("POST", f"/api/connections/{conn}/oauth/start", user="mallory").status == 404
    assert stack.call("POST", "/api/connections/conn_nope/oauth/start").status == 404


def test_functions_refreshing_one_grant_at_once_refresh_it_once(stack, protected):
    issuer, mcp = protected(ttl=2)
    conn = _connection(stack, mcp.url)
    _authorize(stack, issuer, conn)
    time.sleep(2.2)  # the access token has expired: every caller must have a new one
    connection, sealed = stack.deps.connections.get_with_secret(TENANT, conn)
    tokens: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def call() -> None:
        start.wait()
        try:
            tokens.append(
                oauth.bearer(
                    stack.deps, TENANT, connection, sealed, opened=lambda t, c, s: OPENED.get(stack.deps.secret_box, t, c, s)
                )
            )
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert failures == [] and len(tokens) == 4
    assert len(set(tokens)) == 1  # all the new token
    assert len(issuer.events("refresh")) == 1
    assert stack.call("GET", f"/api/connections/{conn}").data["oauth"]["status"] == "authorized"
    tested = stack.call("POST", f"/api/connections/{conn}/test").data
    assert tested["ok"] is True, tested


def test_an_authorization_server_that_is_down_fails_the_call_not_the_grant(stack, protected):
    issuer, mcp = protected(ttl=2)
    conn = _connection(stack, mcp.url)
    _authorize(stack, issuer, conn)
    agent = stack.agent(tools=[{"connectionId": conn}])
    assert "182.3" in stack.say(agent["id"], "use lookup_price for SOL").data["toolCalls"][0]["result"]
    issuer.stop()  # the token endpoint no longer answers
    time.sleep(2.2)
    reply = stack.say(agent["id"], "use lookup_price for SOL")
    assert reply.status == 200, reply.body
    (call,) = reply.data["toolCalls"]
    assert call["isError"] is True and "could not be renewed now (unreachable)" in call["result"], call
    # Not the server's refusal: the grant is kept, so the next refresh may succeed.
    read = stack.call("GET", f"/api/connections/{conn}").data
    assert read["oauth"]["status"] == "authorized" and read["authorization"] is None
    row = stack.deps.connections.oauth_row(TENANT, conn)
    assert row.sealed_tokens is not None
    assert stack.deps.connections.claim_refresh(TENANT, conn, until=int(time.time()) + 10, now=int(time.time()))


def test_testing_a_connection_whose_server_offers_no_oauth_says_why(stack):
    from local.sample_mcp import start

    plain = start()
    try:
        conn = _connection(stack, plain.url)
        tested = stack.call("POST", f"/api/connections/{conn}/test").data
        assert tested["ok"] is False and tested["error"]["code"] == "needs_authorization"
        assert tested["authorization"]["error"]["code"] == "oauth_discovery_failed"
        assert tested["authorization"]["start"] == f"/api/connections/{conn}/oauth/start"
    finally:
        plain.stop()
