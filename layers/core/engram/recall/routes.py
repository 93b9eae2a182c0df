"""Search over an agent's conversation archive (CM8)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import Deps, Limit, Reply, Tenant, Token, ok
from engram.recall import service as recall

router = Router()
SEARCH_PAGE = 20


@router.get("/api/agents/<agentId>/archive/search")
def search_archive(
    deps: Deps,
    tenant: Tenant,
    agentId: str,
    q: Annotated[str | None, Query(max_length=2000)] = None,
    limit: Limit = SEARCH_PAGE,
    nextToken: Token = None,
) -> Reply:
    return ok(recall.search_archive(deps.agents, deps.archive, tenant, agentId, q, limit=limit, token=nextToken))
