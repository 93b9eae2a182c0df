"""The caller's facts ("What I know about you"): list, add, edit, archive."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, IncludeArchived, Limit, Reply, SearchText, Token, deps_of, ok, tenant_of
from engram.facts import service as facts
from engram.facts.models import FactCreate, FactUpdate, MeUpdate

router = Router()


@router.get("/api/me/facts")
def list_facts(
    includeArchived: IncludeArchived = False, limit: Limit = PAGE, nextToken: Token = None, q: SearchText = None
) -> Reply:
    return ok(
        facts.list_facts(deps_of(router), tenant_of(router), include_archived=includeArchived, limit=limit, token=nextToken, q=q)
    )


@router.post("/api/me/facts")
def add_fact(body: FactCreate) -> Reply:
    fact, created = facts.add_fact(
        deps_of(router), tenant_of(router), body.fact, source="profile", confidence=body.confidence, topic=body.topic
    )
    return ok(fact.public(), 201 if created else 200)


@router.patch("/api/me/facts/<factId>")
def update_fact(factId: str, body: FactUpdate) -> Reply:
    return ok(facts.update_fact(deps_of(router), tenant_of(router), factId, body).public())


@router.delete("/api/me/facts/<factId>")
def archive_fact(factId: str) -> Reply:
    return ok(facts.archive_fact(deps_of(router), tenant_of(router), factId, "user_deleted").public())


@router.get("/api/me")
def get_me() -> Reply:
    deps, tenant = deps_of(router), tenant_of(router)
    return ok(facts.me(deps, tenant))


@router.patch("/api/me")
def update_me(body: MeUpdate) -> Reply:
    return ok(facts.update_me(deps_of(router), tenant_of(router), body))
