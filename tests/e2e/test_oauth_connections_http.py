"""OAuth connections (TL9) as a user meets them, over HTTP against the local stack: a real
authorization server (oidc-provider, tests/oauth) in front of a real MCP server that accepts only
tokens issued for it (audience-bound JWTs). Authorize, call a tool through a chat turn, refresh
after the access token expired, revoke on delete; states of another user, replayed or expired are
refused; no token or secret in any answer, log line, export or transcript."""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request

import boto3
import pytest

from tests.e2e.test_local_stack_http import http, wait_for_run
from tests.integration.logs import info_log
from tests.oauth.fixture import AuthorizationServer, free_port, protected_mcp_server

CALLBACK = "/api/connections/oauth/callback"
TOKEN_TTL_S = 4  # short, so a test sees a refresh


@pytest.fixture(scope="module")
def servers():
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = AuthorizationServer.start(resources=[{"resource": resource, "scope": "tools", "ttl": TOKEN_TTL_S}])
    mcp = protected_mcp_server(issuer.issuer, port)
    yield issuer, mcp
    mcp.stop()
    issuer.stop()


def _get(url: str) -> tuple[int, str, dict[str, str]]:
    """A browser's GET without a bearer token."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers)


def _authorize(url: str, issuer: AuthorizationServer, connection_id: str, user: str = "alice") -> str:
    """Starts an authorization and signs in at the authorization server; the callback URL the
    browser would open next (not opened)."""
    status, started = http(url, "POST", f"/api/connections/{connection_id}/oauth/start", user=user)
    assert status == 200, started
    return issuer.sign_in(started["data"]["authorizationUrl"], stop_at=url + CALLBACK)


def _state_of(callback_url: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(callback_url).query)["state"][0]


def _with_state(callback_url: str, state: str) -> str:
    parts = urllib.parse.urlsplit(callback_url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    query["state"] = state
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _sealed_grant(live, connection_id: str, user: str = "alice") -> dict:
    """The grant as Engram keeps it, opened with KMS the way the functions open it (the test must
    know the refresh token to look for it everywhere)."""
    from engram.kernel.ids import tenant_key

    dynamo = boto3.client("dynamodb", endpoint_url=live.moto_url, region_name="us-east-1")
    kms = boto3.client("kms", endpoint_url=live.moto_url, region_name="us-east-1")
    tenant = tenant_key(user)
    item = dynamo.get_item(
        TableName=live.resources.table_name(), Key={"PK": {"S": tenant}, "SK": {"S": f"CONN#{connection_id}"}}
    )["Item"]
    opened = kms.decrypt(
        CiphertextBlob=base64.b64decode(item["sealedAuth"]["S"]),
        EncryptionContext={"tenant": tenant, "connectionId": connection_id},
    )
    return json.loads(opened["Plaintext"])


def test_an_oauth_connection_is_authorized_used_refreshed_and_revoked(live, servers, caplog):
    caplog.set_level(logging.INFO)
    issuer, mcp = servers
    url = live.url.rstrip("/")
    status, created = http(url, "POST", "/api/connections", body={"name": "tracker", "url": mcp.url, "oauth": {}})
    assert status == 201, created
    conn = created["data"]["id"]
    assert created["data"]["oauth"]["status"] == "needs_authorization"

    # Testing it before any grant says so, with the URL to grant it (discovered from the 401).
    status, tested = http(url, "POST", f"/api/connections/{conn}/test")
    assert status == 200 and tested["data"]["ok"] is False, tested
    assert tested["data"]["error"]["code"] == "needs_authorization"
    first_url = tested["data"]["authorization"]["authorizationUrl"]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(first_url).query)
    assert first_url.startswith(issuer.issuer + "/auth?")
    assert query["resource"] == [mcp.url] and query["code_challenge_method"] == ["S256"]
    assert query["redirect_uri"] == [url + CALLBACK] and query["scope"] == ["tools"]
    status, read = http(url, "GET", f"/api/connections/{conn}")
    assert read["data"]["oauth"]["registration"] == "dynamic" and read["data"]["oauth"]["issuer"] == issuer.issuer
    assert read["data"]["authorization"]["authorizationUrl"].startswith(issuer.issuer)

    # The person opens the URL, signs in, consents; the browser comes back to the callback.
    callback = _authorize(url, issuer, conn)
    status, page, headers = _get(callback)
    assert status == 200 and "Engram may now use tracker" in page, page
    assert "no-store" in headers.get("Cache-Control", "")
    status, read = http(url, "GET", f"/api/connections/{conn}")
    assert read["data"]["oauth"]["status"] == "authorized" and read["data"]["authorization"] is None
    assert read["data"]["oauth"]["scope"] and "tools" in read["data"]["oauth"]["scope"]

    # The same callback again (a replay) is refused and changes nothing.
    status, page, _ = _get(callback)
    assert status == 400 and "used already" in page

    # The tools work in a chat turn; the MCP server saw a token issued for it.
    status, tested = http(url, "POST", f"/api/connections/{conn}/test")
    assert tested["data"]["ok"] is True and [t["name"] for t in tested["data"]["tools"]] == ["lookup_price", "search_tickets"]
    status, agent = http(url, "POST", "/api/agents", body={"name": "Desk", "tools": [{"connectionId": conn}]})
    agent_id = agent["data"]["id"]
    status, turn = http(
        url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "use lookup_price for SOL"}
    )
    assert status == 200, turn
    (call,) = turn["data"]["toolCalls"]
    assert call["name"] == "mcp__tracker__lookup_price" and "182.3" in call["result"], call
    assert mcp.verifier.accepted
    grant = _sealed_grant(live, conn)
    assert grant["refresh_token"]

    # After the access token expired, the next turn refreshes it first (the server saw it).
    time.sleep(TOKEN_TTL_S + 0.5)
    refreshes = len(issuer.events("refresh"))
    status, turn = http(
        url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "use lookup_price for ETH"}
    )
    assert status == 200 and "3412.75" in turn["data"]["toolCalls"][0]["result"], turn
    assert len(issuer.events("refresh")) == refreshes + 1
    refreshed = _sealed_grant(live, conn)
    assert refreshed["access_token"] != grant["access_token"]

    # The server refuses a token before its time (revoked on its side): that call fails, the
    # grant is renewed before the next one.
    mcp.verifier.refuse = True
    status, turn = http(
        url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "use lookup_price for BTC"}
    )
    assert turn["data"]["toolCalls"][0]["isError"] is True and "unauthorized" in turn["data"]["toolCalls"][0]["result"]
    mcp.verifier.refuse = False
    before = len(issuer.events("refresh"))
    status, turn = http(
        url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": "use lookup_price for BTC"}
    )
    assert "97250.5" in turn["data"]["toolCalls"][0]["result"], turn
    assert len(issuer.events("refresh")) == before + 1
    renewed = _sealed_grant(live, conn)

    # A manual run (the heartbeat function) uses the grant too, refreshing it when due.
    time.sleep(TOKEN_TTL_S + 0.5)
    before = len(issuer.events("refresh"))
    status, _ = http(url, "PATCH", f"/api/agents/{agent_id}", body={"defaultPrompt": "use search_tickets with login"})
    status, manual = http(url, "POST", f"/api/agents/{agent_id}/runs", body={})
    assert status == 202, manual
    run = wait_for_run(url, manual["data"]["runId"])
    assert run["status"] == "succeeded" and "ENG-101" in run["toolCalls"][0]["result"], run
    assert len(issuer.events("refresh")) == before + 1
    latest = _sealed_grant(live, conn)

    # Nothing of the grant in any answer, export, transcript or log line.
    secrets = {g[kind] for g in (grant, refreshed, renewed, latest) for kind in ("access_token", "refresh_token")}
    secrets |= set(mcp.verifier.accepted)
    seen = [
        json.dumps(http(url, "GET", path)[1])
        for path in (
            "/api/connections",
            f"/api/connections/{conn}",
            f"/api/agents/{agent_id}/sessions/dashboard",
            f"/api/agents/{agent_id}/runs",
            f"/api/runs/{run['id']}",
            "/api/me/export",
        )
    ]
    seen.append(json.dumps(turn))
    seen.append(info_log(caplog))
    for text in seen:
        for secret in secrets:
            assert secret not in text

    # Deleting the connection revokes the grant at the server, then forgets it.
    revocations = len(issuer.events("revocation"))
    status, deleted = http(url, "DELETE", f"/api/connections/{conn}")
    assert status == 200 and deleted["data"]["grantRevoked"] is True, (deleted, issuer.events())
    assert len(issuer.events("revocation")) == revocations + 1  # the refresh token: the grant ends
    # The server no longer refreshes that grant.
    assert _refresh_refused(issuer, latest["refresh_token"])


def test_states_of_another_user_replayed_or_expired_are_refused(live, servers):
    issuer, mcp = servers
    url = live.url.rstrip("/")
    ids = {}
    for user in ("alice", "mallory"):
        status, created = http(url, "POST", "/api/connections", user=user, body={"name": "desk", "url": mcp.url, "oauth": {}})
        assert status == 201, created
        ids[user] = created["data"]["id"]

    # Mallory cannot start (or see) Alice's connection.
    assert http(url, "POST", f"/api/connections/{ids['alice']}/oauth/start", user="mallory")[0] == 404

    # A code Alice's browser brought back, presented with Mallory's state: refused (the code was
    # issued to Alice's flow, its PKCE verifier and client), Mallory's connection stays unauthorised.
    alices = _authorize(url, issuer, ids["alice"])
    mallorys = _authorize(url, issuer, ids["mallory"], user="mallory")
    status, page, _ = _get(_with_state(alices, _state_of(mallorys)))
    assert status == 400 and "could not be exchanged" in page, page
    assert (
        http(url, "GET", f"/api/connections/{ids['mallory']}", user="mallory")[1]["data"]["oauth"]["status"]
        == "needs_authorization"
    )
    # Alice's own flow completes; her connection is hers alone.
    status, page, _ = _get(alices)
    assert status == 200, page
    assert http(url, "GET", f"/api/connections/{ids['alice']}")[1]["data"]["oauth"]["status"] == "authorized"

    # A state unknown to Engram, or none at all: refused.
    assert _get(_with_state(alices, "made-up"))[0] == 400
    assert _get(url + CALLBACK + "?code=x")[0] == 400

    # An expired state (its row says it expired, as after OAUTH_STATE_TTL_SECONDS): refused.
    pending = _authorize(url, issuer, ids["mallory"], user="mallory")
    _expire_states(live)
    status, page, _ = _get(pending)
    assert status == 400 and "expired" in page


def _refresh_refused(issuer: AuthorizationServer, refresh_token: str) -> bool:
    """Whether the token endpoint refuses the refresh token (the client is public: no secret)."""
    client = issuer.events("registration")[0]["client"]
    form = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client}).encode()
    try:
        urllib.request.urlopen(urllib.request.Request(issuer.issuer + "/token", data=form), timeout=10)
    except urllib.error.HTTPError as err:
        return err.code == 400 and json.loads(err.read())["error"] == "invalid_grant"
    return False


def _expire_states(live) -> None:
    dynamo = boto3.client("dynamodb", endpoint_url=live.moto_url, region_name="us-east-1")
    table = live.resources.table_name()
    for item in dynamo.scan(TableName=table)["Items"]:
        if item["PK"]["S"].startswith("OAUTHSTATE#"):
            dynamo.update_item(
                TableName=table,
                Key={"PK": item["PK"], "SK": item["SK"]},
                UpdateExpression="SET expiresAt = :past",
                ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
            )


def test_the_cli_prints_the_url_that_connects_a_tool_server(live, servers, monkeypatch, capsys):
    from engram_client import cli

    issuer, mcp = servers
    url = live.url.rstrip("/")
    monkeypatch.setenv("ENGRAM_URL", url)
    monkeypatch.setenv("ENGRAM_API_KEY", "dev-cli-oauth")
    status, created = http(url, "POST", "/api/connections", user="cli-oauth", body={"name": "ops", "url": mcp.url, "oauth": {}})
    assert status == 201, created
    assert cli.main(["connections"]) == 0
    assert "oauth: needs authorization" in capsys.readouterr().out

    assert cli.main(["connections", "authorize", "ops"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Open this URL in a browser to connect ops")
    assert _get(issuer.sign_in(printed[1], stop_at=url + CALLBACK))[0] == 200
    assert cli.main(["connections"]) == 0
    assert "oauth: connected" in capsys.readouterr().out

    # A header connection has nothing to authorize.
    http(url, "POST", "/api/connections", user="cli-oauth", body={"name": "plain", "url": mcp.url})
    assert cli.main(["connections", "authorize", "plain"]) == 2
    assert "not OAuth" in capsys.readouterr().err

    # Deleting the account ends the grant at the server too.
    revocations = len(issuer.events("revocation"))
    assert http(url, "DELETE", "/api/me", user="cli-oauth")[1]["data"]["deleted"]["connections"] == 2
    assert len(issuer.events("revocation")) == revocations + 1


def test_a_preregistered_client_with_a_secret_and_a_grant_the_server_withdraws(live, caplog):
    """The client given with the connection is used (no registration), its secret authenticates
    at the token endpoint and is never shown; when the server ends the grant, the next turn's call
    answers needs_authorization and the connection says so with a new URL."""
    caplog.set_level(logging.INFO)
    url = live.url.rstrip("/")
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    secret = "pre-registered-secret-" + "7" * 24
    client = {
        "client_id": "engram-pre",
        "client_secret": secret,
        "redirect_uris": [url + CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    issuer = AuthorizationServer.start(resources=[{"resource": resource, "scope": "tools", "ttl": 2}], clients=[client])
    mcp = protected_mcp_server(issuer.issuer, port)
    try:
        body = {"name": "crm", "url": resource, "oauth": {"clientId": "engram-pre", "clientSecret": secret}}
        status, created = http(url, "POST", "/api/connections", body=body)
        assert status == 201, created
        conn = created["data"]["id"]
        callback = _authorize(url, issuer, conn)
        assert "client_id=engram-pre" in _start_url_of(url, conn)
        assert _get(callback)[0] == 200
        status, read = http(url, "GET", f"/api/connections/{conn}")
        assert read["data"]["oauth"]["registration"] == "preregistered" and read["data"]["oauth"]["status"] == "authorized"
        assert issuer.events("registration") == []
        status, agent = http(url, "POST", "/api/agents", body={"name": "Crm", "tools": [{"connectionId": conn}]})
        agent_id = agent["data"]["id"]
        message = {"message": "use lookup_price for BTC"}
        status, turn = http(url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body=message)
        assert status == 200 and "97250.5" in turn["data"]["toolCalls"][0]["result"], turn

        # The server withdraws the grant (its refresh token revoked); the access token expires.
        grant = _sealed_grant(live, conn)
        form = urllib.parse.urlencode({"token": grant["refresh_token"], "token_type_hint": "refresh_token"}).encode()
        revoke = urllib.request.Request(issuer.issuer + "/token/revocation", data=form)
        revoke.add_header("authorization", "Basic " + base64.b64encode(f"engram-pre:{secret}".encode()).decode())
        assert urllib.request.urlopen(revoke, timeout=10).status == 200
        time.sleep(2.5)
        status, turn = http(url, "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body=message)
        assert status == 200, turn
        (call,) = turn["data"]["toolCalls"]
        assert call["isError"] is True and "needs authorization" in call["result"], call
        status, read = http(url, "GET", f"/api/connections/{conn}")
        assert read["data"]["oauth"] == {**read["data"]["oauth"], "status": "needs_authorization", "reason": "refresh_refused"}
        assert read["data"]["authorization"]["authorizationUrl"].startswith(issuer.issuer + "/auth?")
        status, tested = http(url, "POST", f"/api/connections/{conn}/test")
        assert tested["data"]["error"]["code"] == "needs_authorization" and tested["data"]["authorization"]["authorizationUrl"]

        for text in (json.dumps(read), json.dumps(turn), json.dumps(http(url, "GET", "/api/me/export")[1]), info_log(caplog)):
            assert secret not in text and grant["refresh_token"] not in text and grant["access_token"] not in text
    finally:
        mcp.stop()
        issuer.stop()


def _start_url_of(url: str, connection_id: str) -> str:
    return http(url, "POST", f"/api/connections/{connection_id}/oauth/start")[1]["data"]["authorizationUrl"]
