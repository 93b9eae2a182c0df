"""Sessions, runs and usage."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from .. import services
from ..deps import get_deps
from ..models import SessionCreate
from .http import ok, tenant

router = Router()

Limit = Annotated[int, Query(ge=1, le=100)]
Token = Annotated[str | None, Query(max_length=2048)]


@router.post("/api/agents/<agentId>/sessions")
def create_session(agentId: str, body: SessionCreate):
    return ok(services.create_session(get_deps(), tenant(router), agentId, body).public(), 201)


@router.get("/api/agents/<agentId>/sessions")
def list_sessions(agentId: str, limit: Limit = 50, nextToken: Token = None):
    return ok(services.list_sessions(get_deps(), tenant(router), agentId, limit, nextToken))


@router.get("/api/agents/<agentId>/sessions/<sessionId>")
def get_session(agentId: str, sessionId: str):
    return ok(services.get_session(get_deps(), tenant(router), agentId, sessionId))


@router.delete("/api/agents/<agentId>/sessions/<sessionId>")
def delete_session(agentId: str, sessionId: str):
    return ok(services.delete_session(get_deps(), tenant(router), agentId, sessionId))


@router.get("/api/agents/<agentId>/runs")
def list_runs(agentId: str, limit: Limit = 50, nextToken: Token = None):
    return ok(services.list_runs(get_deps(), tenant(router), agentId, limit, nextToken))


@router.get("/api/runs/<runId>")
def get_run(runId: str):
    return ok(services.get_run(get_deps(), tenant(router), runId).public())


@router.get("/api/usage")
def list_usage(
    agentId: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = None,
    sessionId: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_:-]{1,140}$")] = None,
    limit: Limit = 100,
    nextToken: Token = None,
):
    return ok(services.list_usage(get_deps(), tenant(router), agentId, sessionId, limit, nextToken))
