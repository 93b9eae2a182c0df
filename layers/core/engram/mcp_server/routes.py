"""POST /mcp (MX1): Engram's MCP server for the caller (a sign-in token or an API key)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Reply, deps_of, principal

router = Router()


@router.post("/mcp")
def mcp() -> Reply:
    from engram.mcp_server import server  # the MCP SDK and starlette only for this route

    event = router.current_event
    headers = {str(k): str(v) for k, v in (event.headers or {}).items()}
    raw = (event.decoded_body or "").encode("utf-8")
    status, out, body = server.handle(deps_of(router), principal(router), headers, raw)
    content_type = out.pop("content-type", "application/json")
    return Response(status_code=status, content_type=content_type, body=body.decode("utf-8"), headers=out)
