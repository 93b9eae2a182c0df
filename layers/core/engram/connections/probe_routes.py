"""`POST /api/connections/{id}/test` and `.../refresh` on the chat function (it loads the MCP SDK)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Deps, Reply, Tenant, ok
from engram.connections.oauth_routes import BaseUrl
from engram.connections.probe import test_connection

router = Router()


@router.post("/api/connections/<connectionId>/test")
def test(deps: Deps, tenant: Tenant, url: BaseUrl, connectionId: str) -> Reply:
    return ok(test_connection(deps, tenant, connectionId, url))


@router.post("/api/connections/<connectionId>/refresh")
def refresh(deps: Deps, tenant: Tenant, url: BaseUrl, connectionId: str) -> Reply:
    """The same as test: the tool list is listed again and cached (the next turn uses it)."""
    return ok(test_connection(deps, tenant, connectionId, url))
