"""POST /api/stream-tickets (api function): a one-time ticket for the WebSocket API."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Reply, deps_of, ok, principal, tenant_of
from engram.streaming.tickets import issue_ticket

router = Router()


@router.post("/api/stream-tickets")
def create_ticket() -> Reply:
    who = principal(router)
    return ok(issue_ticket(deps_of(router), tenant_of(router), who.key_id), 201)
