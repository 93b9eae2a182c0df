"""Connections to MCP servers (TL1): CRUD on the api function. Testing one (listing its tools)
is on the chat function (connections.probe_routes): the api function never loads the MCP SDK."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Deps, Limit, Reply, Tenant, Token, ok
from engram.connections import service as connections
from engram.connections.models import ConnectionCreate, ConnectionUpdate

router = Router()


@router.post("/api/connections")
def create_connection(deps: Deps, tenant: Tenant, body: ConnectionCreate) -> Reply:
    return ok(connections.create_connection(deps, tenant, body).public(), 201)


@router.get("/api/connections")
def list_connections(deps: Deps, tenant: Tenant, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(connections.list_connections(deps.connections, tenant, limit, nextToken))


@router.get("/api/connections/<connectionId>")
def get_connection(deps: Deps, tenant: Tenant, connectionId: str) -> Reply:
    return ok(connections.get_connection(deps, tenant, connectionId))


@router.patch("/api/connections/<connectionId>")
def update_connection(deps: Deps, tenant: Tenant, connectionId: str, body: ConnectionUpdate) -> Reply:
    return ok(connections.update_connection(deps, tenant, connectionId, body).public())


@router.delete("/api/connections/<connectionId>")
def delete_connection(deps: Deps, tenant: Tenant, connectionId: str) -> Reply:
    return ok(connections.delete_connection(deps, tenant, connectionId))
