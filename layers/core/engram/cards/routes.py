"""Card types (result schemas as data) and an agent's past decisions."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import PAGE, Limit, Reply, Token, deps_of, ok, tenant_of
from engram.cards import service as cards
from engram.cards.models import CardTypeBody

router = Router()


@router.get("/api/card-types")
def list_card_types(limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(cards.list_card_types(deps_of(router), tenant_of(router), limit, nextToken))


@router.get("/api/card-types/<name>")
def get_card_type(name: str) -> Reply:
    return ok(cards.get_card_type(deps_of(router), tenant_of(router), name).public())


@router.put("/api/card-types/<name>")
def put_card_type(name: str, body: CardTypeBody) -> Reply:
    card_type, created = cards.put_card_type(deps_of(router), tenant_of(router), name, body)
    return ok(card_type.public(), 201 if created else 200)


@router.get("/api/agents/<agentId>/decisions")
def list_decisions(agentId: str, limit: Annotated[int, Query(ge=1, le=20)] = 5, nextToken: Token = None) -> Reply:
    return ok(cards.list_decisions(deps_of(router), tenant_of(router), agentId, limit, nextToken))
