"""GET /api/health (no authorizer: template.yaml Auth NONE)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import Deps, Reply, ok
from engram.health.service import model_status

router = Router()


@router.get("/api/health")
def health(deps: Deps) -> Reply:
    return ok(model_status(deps.settings), headers={"Cache-Control": "no-store"})
