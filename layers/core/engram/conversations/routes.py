"""Sessions, runs and usage."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Limit, Reply, Token, deps_of, ok, tenant_of
from engram.conversations import service as sessions
from engram.conversations.models import SessionCreate

router = Router()


@router.post("/api/agents/<agentId>/sessions")
def create_session(agentId: str, body: SessionCreate) -> Reply:
    return ok(sessions.create_session(deps_of(router), tenant_of(router), agentId, body).public(), 201)


@router.get("/api/agents/<agentId>/sessions")
def list_sessions(agentId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(sessions.list_sessions(deps_of(router), tenant_of(router), agentId, limit, nextToken))


@router.get("/api/agents/<agentId>/sessions/<sessionId>")
def get_session(agentId: str, sessionId: str) -> Reply:
    return ok(sessions.get_session(deps_of(router), tenant_of(router), agentId, sessionId))


@router.delete("/api/agents/<agentId>/sessions/<sessionId>")
def delete_session(agentId: str, sessionId: str) -> Reply:
    return ok(sessions.delete_session(deps_of(router), tenant_of(router), agentId, sessionId))
