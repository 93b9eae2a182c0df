"""`POST /api/connections/{id}/test` and `.../refresh` on the chat function (it loads the MCP SDK)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Reply, deps_of, ok, tenant_of
from engram.connections.oauth_routes import base_url
from engram.connections.probe import test_connection

router = Router()


@router.post("/api/connections/<connectionId>/test")
def test(connectionId: str) -> Reply:
    return ok(test_connection(deps_of(router), tenant_of(router), connectionId, base_url(router)))


@router.post("/api/connections/<connectionId>/refresh")
def refresh(connectionId: str) -> Reply:
    """The same as test: the tool list is listed again and cached (the next turn uses it)."""
    return ok(test_connection(deps_of(router), tenant_of(router), connectionId, base_url(router)))
