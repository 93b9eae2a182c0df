"""Agents and workspaces."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.agents import service as agents
from engram.agents.models import AgentCreate, AgentUpdate, WorkspaceCreate, WorkspaceUpdate
from engram.api.http import PAGE, Deps, Limit, Reply, Tenant, Token, ok

router = Router()


@router.post("/api/agents")
def create_agent(deps: Deps, tenant: Tenant, body: AgentCreate) -> Reply:
    return ok(agents.create_agent(deps, tenant, body), 201)


@router.get("/api/agents")
def list_agents(deps: Deps, tenant: Tenant, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(agents.list_agents(deps.agents, tenant, limit, nextToken))


@router.get("/api/agents/<agentId>")
def get_agent(deps: Deps, tenant: Tenant, agentId: str) -> Reply:
    return ok(agents.get_agent(deps.agents, tenant, agentId).public())


@router.patch("/api/agents/<agentId>")
def update_agent(deps: Deps, tenant: Tenant, agentId: str, body: AgentUpdate) -> Reply:
    return ok(agents.update_agent(deps, tenant, agentId, body).public())


@router.delete("/api/agents/<agentId>")
def delete_agent(deps: Deps, tenant: Tenant, agentId: str) -> Reply:
    return ok(agents.delete_agent(deps, tenant, agentId))


@router.post("/api/agents/<agentId>/webhook-secret")
def rotate_webhook_secret(deps: Deps, tenant: Tenant, agentId: str) -> Reply:
    return ok(agents.rotate_webhook_secret(deps.agents, deps.settings, tenant, agentId))


@router.post("/api/workspaces")
def create_workspace(deps: Deps, tenant: Tenant, body: WorkspaceCreate) -> Reply:
    return ok(agents.create_workspace(deps.workspaces, tenant, body).public(), 201)


@router.get("/api/workspaces")
def list_workspaces(deps: Deps, tenant: Tenant, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(agents.list_workspaces(deps.workspaces, tenant, limit, nextToken))


@router.get("/api/workspaces/<workspaceId>")
def get_workspace(deps: Deps, tenant: Tenant, workspaceId: str) -> Reply:
    return ok(agents.get_workspace(deps.workspaces, tenant, workspaceId).public())


@router.patch("/api/workspaces/<workspaceId>")
def update_workspace(deps: Deps, tenant: Tenant, workspaceId: str, body: WorkspaceUpdate) -> Reply:
    return ok(agents.update_workspace(deps.workspaces, tenant, workspaceId, body).public())


@router.delete("/api/workspaces/<workspaceId>")
def delete_workspace(deps: Deps, tenant: Tenant, workspaceId: str) -> Reply:
    agents.delete_workspace(deps.workspaces, deps.agents, deps.memories, tenant, workspaceId)
    return ok({"id": workspaceId, "deleted": True})
