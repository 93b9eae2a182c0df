"""GET /api/health (no authorizer: template.yaml Auth NONE)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Reply, deps_of, ok
from engram.health.service import model_status

router = Router()


@router.get("/api/health")
def health() -> Reply:
    return ok(model_status(deps_of(router).settings), headers={"Cache-Control": "no-store"})
