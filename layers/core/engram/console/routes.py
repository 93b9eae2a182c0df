"""The console: a single-page app served by the api function from `static/` (GET / and
GET /console/<asset>), plus its sign-in settings (GET /console/config.json).

These routes have no authorizer (template.yaml: Auth NONE): the page and its code are public, and
everything the page shows comes from the API with the person's token. Every answer carries a
strict Content-Security-Policy: scripts and styles from this origin only, no inline code, and
requests only to this origin (and the user pool's login domain, for the token exchange).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Deps, fail
from engram.kernel.settings import Settings

router = Router()

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".json": "application/json",
}
_ASSET = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
GZIP_MIN_BYTES = 1024  # below this the gzip header and the CPU are not worth it


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes | None  # None when gzip would not pay (small or already compressed)
    content_type: str
    etag: str


@cache
def _assets() -> dict[str, Asset]:
    """Every file of static/, read and compressed once per container (a few tens of kB)."""
    out: dict[str, Asset] = {}
    for path in sorted(STATIC.iterdir()):
        content_type = CONTENT_TYPES.get(path.suffix)
        if not path.is_file() or content_type is None or not _ASSET.match(path.name):
            continue
        body = path.read_bytes()
        textual = content_type.startswith("text/") or content_type in ("application/json", "image/svg+xml")
        packed = gzip.compress(body, compresslevel=9, mtime=0) if textual and len(body) >= GZIP_MIN_BYTES else None
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        out[path.name] = Asset(body, packed if packed and len(packed) < len(body) else None, content_type, etag)
    return out


def _login_url(settings: Settings) -> str:
    """The user pool's login domain when the console signs in there, else ''."""
    return settings.console_login_url if settings.console_sign_in == "managed-login" else ""


def _stream_origin(settings: Settings) -> str:
    """The WebSocket API's origin (wss://host[:port]), which the chat page streams from, else ''."""
    parts = urlsplit(settings.stream_url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("ws", "wss") and parts.netloc else ""


def security_headers(settings: Settings) -> dict[str, str]:
    login = f" {_login_url(settings)}" if _login_url(settings) else ""
    stream = f" {_stream_origin(settings)}" if _stream_origin(settings) else ""
    policy = "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src 'self'{login}{stream}",
            f"form-action 'self'{login}",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def _serve(settings: Settings, name: str) -> Response[str]:
    asset = _assets().get(name)
    if asset is None:
        return fail(404, "not_found", "the console has no such file")
    headers = {
        **security_headers(settings),
        # Revalidated on every load (a 304 costs no body): a deploy is seen at once, and the
        # ETag is the content's hash so an unchanged file is never sent twice.
        "Cache-Control": "no-cache",
        "ETag": asset.etag,
        "Vary": "Accept-Encoding",
    }
    request_headers = router.current_event.headers or {}
    if asset.etag in str(request_headers.get("if-none-match", "")):
        return Response(status_code=304, body="", headers=headers)
    body = asset.body
    if asset.gzipped is not None and "gzip" in str(request_headers.get("accept-encoding", "")):
        body, headers["Content-Encoding"] = asset.gzipped, "gzip"
    # API Gateway sends a base64 body on as the bytes it encodes. The text is encoded here, not
    # by the resolver, because the response validation would read a bytes body as UTF-8.
    response: Response[str] = Response(
        status_code=200, content_type=asset.content_type, body=base64.b64encode(body).decode(), headers=headers
    )
    response.base64_encoded = True
    return response


@router.get("/")
def index(deps: Deps) -> Response[str]:
    return _serve(deps.settings, "index.html")


@router.get("/console/config.json")
def config(deps: Deps) -> Response[str]:
    """How the page signs a person in; no secret in it (a public client id at most)."""
    settings: Settings = deps.settings
    scopes = " ".join(dict.fromkeys(["openid", "email", *settings.required_scopes.split()]))
    body = {
        "signIn": settings.console_sign_in,
        "loginUrl": _login_url(settings),
        "clientId": settings.console_client_id if _login_url(settings) else "",
        "scopes": scopes,
    }
    headers = {**security_headers(settings), "Cache-Control": "no-cache"}
    return Response(status_code=200, content_type="application/json", body=json.dumps(body), headers=headers)


@router.get("/console/<asset>")
def console_asset(deps: Deps, asset: str) -> Response[str]:
    return _serve(deps.settings, asset)  # only names of files read from static/ are served
