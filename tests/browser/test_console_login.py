"""The console's managed login (a deployed stack with the created user pool): authorization code
with PKCE, in the browser, against a stand-in for the pool's login domain that checks what
Cognito checks (client id, redirect URI, state round trip, S256 code challenge) and answers the
token exchange with CORS, as the real one does. The stack is the local one with the console told
to use that domain; the token it hands out is a local `dev-<user>` one, which the local authorizer
accepts."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

CLIENT_ID = "console-client-1"


class LoginDomain:
    """/oauth2/authorize (signs `frank` in at once), /oauth2/token, /logout."""

    def __init__(self) -> None:
        self.codes: dict[str, dict[str, str]] = {}
        self.exchanges: list[dict[str, str]] = []
        self.logouts: list[dict[str, str]] = []
        domain = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any] | None = None, location: str | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("access-control-allow-origin", self.headers.get("origin") or "*")
                if location:
                    self.send_header("location", location)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self.send_header("access-control-allow-origin", self.headers.get("origin") or "*")
                self.send_header("access-control-allow-headers", "content-type")
                self.send_header("access-control-allow-methods", "POST")
                self.end_headers()

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/oauth2/authorize":
                    ok = (
                        query.get("response_type") == "code"
                        and query.get("client_id") == CLIENT_ID
                        and query.get("code_challenge_method") == "S256"
                        and "aws.cognito.signin.user.admin" in query.get("scope", "").split()
                    )
                    if not ok:
                        self._send(400, {"error": "invalid_request"})
                        return
                    code = f"code-{len(domain.codes)}"
                    domain.codes[code] = query
                    self._send(302, location=f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}")
                elif url.path == "/logout":
                    domain.logouts.append(query)
                    self._send(302, location=query["logout_uri"])
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["content-length"])).decode()).items()}
                domain.exchanges.append(form)
                asked = domain.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if (
                    asked is None
                    or form.get("grant_type") != "authorization_code"
                    or form.get("client_id") != CLIENT_ID
                    or form.get("redirect_uri") != asked["redirect_uri"]
                    or challenge != asked["code_challenge"]
                ):
                    self._send(400, {"error": "invalid_grant", "error_description": "the code or the verifier is wrong"})
                    return
                claims = base64.urlsafe_b64encode(json.dumps({"email": "frank@example.com"}).encode()).rstrip(b"=").decode()
                self._send(
                    200,
                    {"access_token": "dev-frank", "id_token": f"e30.{claims}.sig", "expires_in": 3600, "token_type": "Bearer"},
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def login_domain() -> Iterator[LoginDomain]:
    domain = LoginDomain()
    yield domain
    domain.close()


@pytest.fixture(scope="module")
def stack(login_domain: LoginDomain) -> Iterator[Any]:
    """The local stack, its console told to sign in with the stand-in login domain."""
    from local import resources
    from local.stack import start_stack

    saved = dict(resources.LOCAL_ENV_OVERRIDES)
    resources.LOCAL_ENV_OVERRIDES.update(
        CONSOLE_SIGN_IN="managed-login", CONSOLE_LOGIN_URL=login_domain.url, CONSOLE_CLIENT_ID=CLIENT_ID
    )
    try:
        handle = start_stack(port=0, model_provider="offline", retry_delay=1, workers=False)
        try:
            yield handle
        finally:
            handle.stop()
    finally:
        resources.LOCAL_ENV_OVERRIDES.clear()
        resources.LOCAL_ENV_OVERRIDES.update(saved)


def test_managed_login_with_pkce_and_sign_out(console, login_domain):
    c = console("managed-login")
    c.page.goto("/")
    c.page.get_by_role("button", name="Sign in").click()
    # Off to the login domain and back with a code; the page trades it (with its verifier) for tokens.
    expect(c.page.get_by_role("heading", name="Agents")).to_be_visible()
    expect(c.page.locator("#signed-in-user")).to_have_text("frank@example.com")
    assert "code=" not in c.page.url  # the code is taken off the address bar
    (exchange,) = login_domain.exchanges
    assert exchange["redirect_uri"] == c.url + "/" and len(exchange["code_verifier"]) >= 43
    assert c.page.evaluate("sessionStorage.getItem('engram.token')") == "dev-frank"
    assert c.page.evaluate("Object.keys(localStorage).length") == 0
    c.user = "frank"
    c.api("POST", "/api/agents", {"name": "Franks agent"})
    c.page.reload()
    expect(c.page.get_by_role("link", name="Franks agent")).to_be_visible()
    c.shot("managed-login")

    c.page.get_by_role("button", name="Sign out").click()
    expect(c.page.get_by_role("button", name="Sign in")).to_be_visible()
    assert login_domain.logouts[-1] == {"client_id": CLIENT_ID, "logout_uri": c.url + "/"}
    assert c.page.evaluate("sessionStorage.getItem('engram.token')") is None


def test_a_forged_callback_is_refused(console, login_domain):
    c = console("forged-callback")
    c.page.goto("/?code=code-x&state=not-mine")
    expect(c.page.get_by_role("alert")).to_have_attribute("data-code", "sign_in_failed")
    expect(c.page.get_by_role("button", name="Sign in")).to_be_visible()
    assert c.page.evaluate("sessionStorage.getItem('engram.token')") is None
