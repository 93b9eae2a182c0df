"""POST /api/runs/{runId}/approvals (TL10): the owner decides a tool call held for approval."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Reply, deps_of, ok, principal, tenant_of
from engram.approvals import service
from engram.approvals.models import ApprovalIn

router = Router()


@router.post("/api/runs/<runId>/approvals")
def decide_approval(runId: str, body: ApprovalIn) -> Reply:
    run = service.decide(deps_of(router), tenant_of(router), principal(router).sub, runId, body)
    return ok(run.public())
