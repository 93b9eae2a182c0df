"""Connections to MCP servers (TL1): CRUD on the api function. Testing one (listing its tools)
is on the chat function (connections.probe_routes): the api function never loads the MCP SDK."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Limit, Reply, Token, deps_of, ok, tenant_of
from engram.connections import service as connections
from engram.connections.models import ConnectionCreate, ConnectionUpdate

router = Router()


@router.post("/api/connections")
def create_connection(body: ConnectionCreate) -> Reply:
    return ok(connections.create_connection(deps_of(router), tenant_of(router), body).public(), 201)


@router.get("/api/connections")
def list_connections(limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(connections.list_connections(deps_of(router), tenant_of(router), limit, nextToken))


@router.get("/api/connections/<connectionId>")
def get_connection(connectionId: str) -> Reply:
    return ok(connections.get_connection(deps_of(router), tenant_of(router), connectionId))


@router.patch("/api/connections/<connectionId>")
def update_connection(connectionId: str, body: ConnectionUpdate) -> Reply:
    return ok(connections.update_connection(deps_of(router), tenant_of(router), connectionId, body).public())


@router.delete("/api/connections/<connectionId>")
def delete_connection(connectionId: str) -> Reply:
    return ok(connections.delete_connection(deps_of(router), tenant_of(router), connectionId))
