"""OAuth connections' routes (TL9) on the chat function, which reaches tool servers already:
starting an authorization (discovery and registration over the network), the public callback the
person's browser returns to, and Engram's Client ID Metadata Document."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.request import Request

from engram.api.http import Deps, Reply, Tenant, ok
from engram.connections import oauth
from engram.kernel.errors import EngramError
from engram.kernel.observability import logger

router = Router()


def base_url(request: Request, deps: Deps) -> str:
    """The API's public URL as this request reached it (or PUBLIC_API_URL)."""
    headers = request.headers
    return oauth.base_url_of(deps.settings, headers.get("host"), headers.get("x-forwarded-proto"))


BaseUrl = Annotated[str, Depends(base_url)]


@router.post("/api/connections/<connectionId>/oauth/start")
def start(deps: Deps, tenant: Tenant, url: BaseUrl, connectionId: str) -> Reply:
    """`{authorizationUrl, expiresAt}`: the URL the person opens to grant Engram access."""
    return ok(oauth.start(deps, tenant, connectionId, url))


# Bounded so the whole query stays well within what API Gateway and the local front accept.
State = Annotated[str | None, Query(max_length=128)]
Code = Annotated[str | None, Query(max_length=512)]
Error = Annotated[str | None, Query(max_length=64)]
Issuer = Annotated[str | None, Query(max_length=512)]


@router.get("/api/connections/oauth/callback")
def callback(deps: Deps, state: State = None, code: Code = None, error: Error = None, iss: Issuer = None) -> Response[str]:
    """Public (the browser carries no token): the one-time state names the user and the connection.
    `iss` (RFC 9207) is compared with the issuer the state was made for."""
    try:
        connection = oauth.finish(deps, state, code, error, iss)
    except EngramError as err:
        logger.info("oauth callback refused", extra={"code": err.code})
        return _page(err.status, False, err.message)
    return _page(200, True, f"Engram may now use {connection.name}. Its tools are available to the agents you gave them to.")


_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def _page(status: int, done: bool, message: str) -> Response[str]:
    html = callback_page(done, message)
    script = _SCRIPT.search(html)
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode() if script else b"").digest()).decode()
    return Response(
        status_code=status,
        content_type="text/html; charset=utf-8",
        body=html,
        headers={
            "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'",
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
        },
    )


@router.get("/api/connections/oauth/client-metadata.json")
def client_metadata(url: BaseUrl) -> Response[str]:
    """Public: the authorization server fetches it to learn Engram's redirect URI (the client id
    is this document's URL)."""
    document = oauth.client_metadata_document(url)
    return Response(
        status_code=200,
        content_type="application/json",
        body=json.dumps(document),
        headers={"Cache-Control": "public, max-age=3600"},
    )


def callback_page(ok: bool, message: str) -> str:
    """The page the person's browser shows after the callback (no token in it). It tells the
    console the outcome on a BroadcastChannel (same origin; the console's opener link is cut by
    its Cross-Origin-Opener-Policy when the popup visits the authorization server) and closes."""
    outcome = json.dumps({"engramOAuth": "done" if ok else "failed", "message": message})
    title = "Connected" if ok else "Not connected"
    text = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    script = (
        "try{const c=new BroadcastChannel('engram-oauth');c.postMessage("
        + outcome.replace("<", "\\u003c")
        + ");c.close()}catch(e){}setTimeout(function(){window.close()},300)"
    )
    return (
        "<!doctype html><html lang=en><meta charset=utf-8><title>Engram: "
        + title
        + "</title><body style='font-family:system-ui;margin:3em'><h1>"
        + title
        + "</h1><p>"
        + text
        + "</p><p>You can close this window.</p><script>"
        + script
        + "</script></body></html>"
    )
