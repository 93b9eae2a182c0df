"""The console's page and files as the stack serves them (GET / and /console/...), over HTTP:
content types, revalidation, gzip, the Content-Security-Policy, and no way out of static/."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest


def fetch(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url.rstrip("/") + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def test_the_page_is_served_without_a_token_with_a_strict_policy(live):
    status, headers, body = fetch(live.url, "/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="/console/app.js">' in body
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "connect-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_files_have_their_content_type(live, name, content_type):
    status, headers, body = fetch(live.url, f"/console/{name}")
    assert status == 200, body[:200]
    assert headers["content-type"] == content_type
    assert "content-security-policy" in headers


def test_gzip_when_asked_and_a_304_for_an_unchanged_file(live):
    status, plain_headers, plain = fetch(live.url, "/console/style.css")
    assert status == 200 and "content-encoding" not in plain_headers
    status, headers, packed = fetch(live.url, "/console/style.css", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(packed) == plain and len(packed) < len(plain) / 2
    assert headers["vary"] == "Accept-Encoding"
    status, headers, body = fetch(live.url, "/console/style.css", {"If-None-Match": plain_headers["etag"]})
    assert status == 304 and body == b""


@pytest.mark.parametrize(
    "path", ["/console/nothing.js", "/console/..%2ftemplate.yaml", "/console/%2e%2e/routes.py", "/console/Routes.py"]
)
def test_nothing_outside_the_console_files(live, path):
    status, headers, body = fetch(live.url, path)
    assert status in (400, 404), (status, body[:200])
    assert b"import" not in body and b"Resources" not in body


def test_the_sign_in_settings_of_the_local_stack(live):
    status, headers, body = fetch(live.url, "/console/config.json")
    assert status == 200
    config = json.loads(body)
    assert config["signIn"] == "dev"  # the local authorizer takes dev-<user> tokens
    assert config["loginUrl"] == "" and config["clientId"] == ""
