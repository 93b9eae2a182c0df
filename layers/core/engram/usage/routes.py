"""GET /api/usage: tokens and cost per agent and session; the breakdowns of the usage totals."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import Deps, Limit, Reply, Tenant, Token, ok
from engram.usage import service as usage

router = Router()

Day = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}$")]


@router.get("/api/usage")
def list_usage(
    deps: Deps,
    tenant: Tenant,
    agentId: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = None,
    sessionId: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_:-]{1,140}$")] = None,
    limit: Limit = 100,
    nextToken: Token = None,
    from_: Annotated[str | None, Query(alias="from", pattern=r"^\d{4}-\d{2}-\d{2}$")] = None,
    to: Day = None,
) -> Reply:
    return ok(usage.list_usage(deps.usage, deps.agents, tenant, agentId, sessionId, limit, nextToken, from_, to))
