"""POST /api/stream-tickets (api function): a one-time ticket for the WebSocket API."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Caller, Deps, Reply, Tenant, ok
from engram.streaming.tickets import issue_ticket

router = Router()


@router.post("/api/stream-tickets")
def create_ticket(deps: Deps, tenant: Tenant, who: Caller) -> Reply:
    return ok(issue_ticket(deps.streams, deps.settings, tenant, who.key_id), 201)
