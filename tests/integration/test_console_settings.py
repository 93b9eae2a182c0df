"""The console's sign-in settings and policy follow the stack: the created user pool's managed
login (its login domain allowed for the token exchange, nothing else), or a pasted token."""

from __future__ import annotations

import json
from typing import Any

from engram.api.http import build_app, stores
from engram.console import routes
from engram.kernel.settings import Settings
from engram.wiring.stores import Stores, clients
from local.apigw import build_http_event

LOGIN = "https://engram-0a1b2c3d4e5f.auth.eu-west-1.amazoncognito.com"


def _get(env: dict[str, str], path: str) -> tuple[int, dict[str, str], Any]:
    app = build_app(routes.router)
    deps = Stores(**clients(Settings.from_env(env)))
    app.dependency_overrides[stores] = lambda: deps  # the stack's stores, under these settings
    route_key = "GET /" if path == "/" else "GET /console/{proxy+}"
    out = app.resolve(build_http_event(route_key, "GET", path, path_params=None), None)
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    return out["statusCode"], headers, out["body"]


def test_managed_login_names_the_pool_domain_and_client_and_allows_only_that_domain():
    env = {
        "CONSOLE_SIGN_IN": "managed-login",
        "CONSOLE_LOGIN_URL": LOGIN,
        "CONSOLE_CLIENT_ID": "4abc123client",
        "REQUIRED_SCOPES": "aws.cognito.signin.user.admin",
    }
    status, headers, body = _get(env, "/console/config.json")
    assert status == 200
    assert json.loads(body) == {
        "signIn": "managed-login",
        "loginUrl": LOGIN,
        "clientId": "4abc123client",
        "scopes": "openid email aws.cognito.signin.user.admin",
    }
    policy = headers["content-security-policy"]
    assert f"connect-src 'self' {LOGIN}" in policy and f"form-action 'self' {LOGIN}" in policy
    _, page_headers, _ = _get(env, "/")
    assert page_headers["content-security-policy"] == policy


def test_an_external_issuer_means_a_pasted_token_and_no_other_origin():
    status, headers, body = _get({"CONSOLE_SIGN_IN": "token", "CONSOLE_LOGIN_URL": LOGIN}, "/console/config.json")
    assert status == 200 and json.loads(body)["signIn"] == "token" and json.loads(body)["loginUrl"] == ""
    assert "amazoncognito" not in headers["content-security-policy"]
    assert "connect-src 'self';" in headers["content-security-policy"]
