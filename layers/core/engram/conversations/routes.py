"""Sessions, runs and usage."""

from __future__ import annotations


from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.conversations import service as sessions
from engram.conversations.models import SessionCreate
from engram.api.http import Limit, Token, deps_of, ok, tenant

router = Router()


@router.post("/api/agents/<agentId>/sessions")
def create_session(agentId: str, body: SessionCreate):
    return ok(sessions.create_session(deps_of(router), tenant(router), agentId, body).public(), 201)


@router.get("/api/agents/<agentId>/sessions")
def list_sessions(agentId: str, limit: Limit = 50, nextToken: Token = None):
    return ok(sessions.list_sessions(deps_of(router), tenant(router), agentId, limit, nextToken))


@router.get("/api/agents/<agentId>/sessions/<sessionId>")
def get_session(agentId: str, sessionId: str):
    return ok(sessions.get_session(deps_of(router), tenant(router), agentId, sessionId))


@router.delete("/api/agents/<agentId>/sessions/<sessionId>")
def delete_session(agentId: str, sessionId: str):
    return ok(sessions.delete_session(deps_of(router), tenant(router), agentId, sessionId))






