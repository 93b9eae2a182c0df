"""The caller's facts ("What I know about you"): list, add, edit, archive."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Deps, IncludeArchived, Limit, Reply, SearchText, Tenant, Token, ok
from engram.facts import service as facts
from engram.facts.models import FactCreate, FactUpdate, MeUpdate

router = Router()


@router.get("/api/me/facts")
def list_facts(
    deps: Deps,
    tenant: Tenant,
    includeArchived: IncludeArchived = False,
    limit: Limit = PAGE,
    nextToken: Token = None,
    q: SearchText = None,
) -> Reply:
    return ok(facts.list_facts(deps.facts, tenant, include_archived=includeArchived, limit=limit, token=nextToken, q=q))


@router.post("/api/me/facts")
def add_fact(deps: Deps, tenant: Tenant, body: FactCreate) -> Reply:
    fact, created = facts.add_fact(
        deps.facts, deps.settings, tenant, body.fact, source="profile", confidence=body.confidence, topic=body.topic
    )
    return ok(fact.public(), 201 if created else 200)


@router.patch("/api/me/facts/<factId>")
def update_fact(deps: Deps, tenant: Tenant, factId: str, body: FactUpdate) -> Reply:
    return ok(facts.update_fact(deps.facts, deps.settings, tenant, factId, body).public())


@router.delete("/api/me/facts/<factId>")
def archive_fact(deps: Deps, tenant: Tenant, factId: str) -> Reply:
    return ok(facts.archive_fact(deps.facts, tenant, factId, "user_deleted").public())


@router.get("/api/me")
def get_me(deps: Deps, tenant: Tenant) -> Reply:
    return ok(facts.me(deps.profiles, deps.usage, tenant))


@router.patch("/api/me")
def update_me(deps: Deps, tenant: Tenant, body: MeUpdate) -> Reply:
    return ok(facts.update_me(deps.profiles, deps.usage, tenant, body))
