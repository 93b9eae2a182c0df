"""Sessions, runs and usage."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Deps, Limit, Reply, Tenant, Token, ok
from engram.conversations import service as sessions
from engram.conversations.models import SessionCreate

router = Router()


@router.post("/api/agents/<agentId>/sessions")
def create_session(deps: Deps, tenant: Tenant, agentId: str, body: SessionCreate) -> Reply:
    return ok(sessions.create_session(deps.sessions, deps.settings, tenant, agentId, body).public(), 201)


@router.get("/api/agents/<agentId>/sessions")
def list_sessions(deps: Deps, tenant: Tenant, agentId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(sessions.list_sessions(deps.sessions, deps.agents, tenant, agentId, limit, nextToken))


@router.get("/api/agents/<agentId>/sessions/<sessionId>")
def get_session(deps: Deps, tenant: Tenant, agentId: str, sessionId: str) -> Reply:
    return ok(sessions.get_session(deps.sessions, deps.agents, deps.history, tenant, agentId, sessionId))


@router.delete("/api/agents/<agentId>/sessions/<sessionId>")
def delete_session(deps: Deps, tenant: Tenant, agentId: str, sessionId: str) -> Reply:
    return ok(sessions.delete_session(deps, tenant, agentId, sessionId))
