"""Card types (result schemas as data) and an agent's past decisions."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import PAGE, Deps, Limit, Reply, Tenant, Token, ok
from engram.cards import service as cards
from engram.cards.models import CardTypeBody

router = Router()


@router.get("/api/card-types")
def list_card_types(deps: Deps, tenant: Tenant, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(cards.list_card_types(deps.card_types, tenant, limit, nextToken))


@router.get("/api/card-types/<name>")
def get_card_type(deps: Deps, tenant: Tenant, name: str) -> Reply:
    return ok(cards.get_card_type(deps.card_types, tenant, name).public())


@router.put("/api/card-types/<name>")
def put_card_type(deps: Deps, tenant: Tenant, name: str, body: CardTypeBody) -> Reply:
    card_type, created = cards.put_card_type(deps.card_types, deps.settings, tenant, name, body)
    return ok(card_type.public(), 201 if created else 200)


@router.get("/api/agents/<agentId>/decisions")
def list_decisions(
    deps: Deps, tenant: Tenant, agentId: str, limit: Annotated[int, Query(ge=1, le=20)] = 5, nextToken: Token = None
) -> Reply:
    return ok(cards.list_decisions(deps.agents, deps.card_types, deps.run_decisions, tenant, agentId, limit, nextToken))
