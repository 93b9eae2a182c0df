"""POST /api/runs/{runId}/approvals (TL10): the owner decides a tool call held for approval."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Caller, Deps, Reply, Tenant, ok
from engram.approvals import service
from engram.approvals.models import ApprovalIn

router = Router()


@router.post("/api/runs/<runId>/approvals")
def decide_approval(deps: Deps, tenant: Tenant, who: Caller, runId: str, body: ApprovalIn) -> Reply:
    run = service.decide(deps.runs, deps.approvals, deps.queues, tenant, who.sub, runId, body)
    return ok(run.public())
