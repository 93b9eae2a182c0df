"""OAuth discovery (TL9) against servers that lie or misbehave, on loopback: a protected resource
metadata naming a resource of another origin, an authorization server's metadata naming another
issuer or no PKCE, a metadata document that redirects to the instance metadata address, an answer
of 300 KB, a challenge pointing at a link-local address. Each is a named failure; nothing follows a
redirect; nothing is fetched from an address the egress policy refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from engram.connections.egress import EgressPolicy, EgressRefused
from engram.connections.oauth_http import OAuthFailure, discover, request
from local.sample_mcp import serve_app

LOCAL = EgressPolicy.of("local", allow_private=False)


class Liar:
    """One loopback server whose OAuth documents are whatever the test sets in `documents`."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        self.seen.append(path)
        found = self.documents.get(path)
        if path == "/mcp":
            found = found or ("401", {"www-authenticate": f'Bearer resource_metadata="{self.base}/.well-known/prm"'}, b"")
        if found is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        status, headers, body = found
        await send(
            {
                "type": "http.response.start",
                "status": int(status),
                "headers": [(k.encode(), v.encode()) for k, v in {"content-type": "application/json", **headers}.items()],
            }
        )
        await send({"type": "http.response.body", "body": body if isinstance(body, bytes) else json.dumps(body).encode()})

    base = ""


@pytest.fixture
def liar() -> Iterator[Liar]:
    app = Liar()
    running = serve_app(app)
    app.base = running.url.removesuffix("/mcp")
    yield app
    running.stop()


def _honest(liar: Liar, **changes: Any) -> None:
    base = liar.base
    liar.documents["/.well-known/prm"] = ("200", {}, {"resource": f"{base}/mcp", "authorization_servers": [base]})
    metadata = {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "code_challenge_methods_supported": ["S256"],
    }
    metadata.update(changes)
    liar.documents["/.well-known/oauth-authorization-server"] = ("200", {}, metadata)


def test_an_honest_server_is_discovered(liar):
    _honest(liar)
    found = discover(LOCAL, f"{liar.base}/mcp")
    assert found.resource == f"{liar.base}/mcp" and found.metadata["token_endpoint"] == f"{liar.base}/token"


def test_a_resource_of_another_origin_is_refused(liar):
    _honest(liar)
    liar.documents["/.well-known/prm"] = (
        "200",
        {},
        {"resource": "https://elsewhere.example/mcp", "authorization_servers": [liar.base]},
    )
    with pytest.raises(OAuthFailure, match="another origin"):
        discover(LOCAL, f"{liar.base}/mcp")


def test_metadata_of_another_issuer_or_without_pkce_is_refused(liar):
    _honest(liar, issuer="https://evil.example")
    with pytest.raises(OAuthFailure, match="another issuer"):
        discover(LOCAL, f"{liar.base}/mcp")
    _honest(liar, code_challenge_methods_supported=["plain"])
    with pytest.raises(OAuthFailure, match="PKCE"):
        discover(LOCAL, f"{liar.base}/mcp")


def test_a_redirect_is_not_followed_and_a_huge_answer_is_cut(liar):
    _honest(liar)
    liar.documents["/.well-known/oauth-authorization-server"] = (
        "302",
        {"location": "http://169.254.169.254/latest/meta-data/"},
        b"",
    )
    with pytest.raises(OAuthFailure) as failed:
        discover(LOCAL, f"{liar.base}/mcp")
    assert failed.value.code == "discovery_failed"  # the redirect was an answer, not followed
    liar.documents["/huge"] = ("200", {}, b"[" + b"1," * 150_000 + b"1]")
    with pytest.raises(OAuthFailure) as failed:
        request(LOCAL, "GET", f"{liar.base}/huge")
    assert failed.value.code == "too_large"


def test_a_challenge_pointing_at_the_metadata_address_is_never_fetched(liar):
    liar.documents["/mcp"] = ("401", {"www-authenticate": 'Bearer resource_metadata="http://169.254.169.254/prm"'}, b"")
    with pytest.raises(OAuthFailure) as failed:
        discover(LOCAL, f"{liar.base}/mcp")
    assert failed.value.code == "discovery_failed"  # the refused URL is skipped, the well-known ones 404
    with pytest.raises(EgressRefused):
        request(LOCAL, "GET", "http://169.254.169.254/prm")
    with pytest.raises(EgressRefused):  # deployed: no loopback, no http
        request(EgressPolicy.of("public", allow_private=False), "GET", f"{liar.base}/.well-known/prm")
