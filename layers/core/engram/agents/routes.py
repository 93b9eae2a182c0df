"""Agents and workspaces."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.agents import service as agents
from engram.agents.models import AgentCreate, AgentUpdate, WorkspaceCreate, WorkspaceUpdate
from engram.api.http import PAGE, Limit, Reply, Token, deps_of, ok, tenant_of

router = Router()


@router.post("/api/agents")
def create_agent(body: AgentCreate) -> Reply:
    return ok(agents.create_agent(deps_of(router), tenant_of(router), body), 201)


@router.get("/api/agents")
def list_agents(limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(agents.list_agents(deps_of(router), tenant_of(router), limit, nextToken))


@router.get("/api/agents/<agentId>")
def get_agent(agentId: str) -> Reply:
    return ok(agents.get_agent(deps_of(router), tenant_of(router), agentId).public())


@router.patch("/api/agents/<agentId>")
def update_agent(agentId: str, body: AgentUpdate) -> Reply:
    return ok(agents.update_agent(deps_of(router), tenant_of(router), agentId, body).public())


@router.delete("/api/agents/<agentId>")
def delete_agent(agentId: str) -> Reply:
    return ok(agents.delete_agent(deps_of(router), tenant_of(router), agentId))


@router.post("/api/agents/<agentId>/webhook-secret")
def rotate_webhook_secret(agentId: str) -> Reply:
    return ok(agents.rotate_webhook_secret(deps_of(router), tenant_of(router), agentId))


@router.post("/api/workspaces")
def create_workspace(body: WorkspaceCreate) -> Reply:
    return ok(agents.create_workspace(deps_of(router), tenant_of(router), body).public(), 201)


@router.get("/api/workspaces")
def list_workspaces(limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(agents.list_workspaces(deps_of(router), tenant_of(router), limit, nextToken))


@router.get("/api/workspaces/<workspaceId>")
def get_workspace(workspaceId: str) -> Reply:
    return ok(agents.get_workspace(deps_of(router), tenant_of(router), workspaceId).public())


@router.patch("/api/workspaces/<workspaceId>")
def update_workspace(workspaceId: str, body: WorkspaceUpdate) -> Reply:
    return ok(agents.update_workspace(deps_of(router), tenant_of(router), workspaceId, body).public())


@router.delete("/api/workspaces/<workspaceId>")
def delete_workspace(workspaceId: str) -> Reply:
    agents.delete_workspace(deps_of(router), tenant_of(router), workspaceId)
    return ok({"id": workspaceId, "deleted": True})
