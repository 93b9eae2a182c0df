"""The caller's whole account: export it, or delete all of it."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.account import service as account
from engram.api.http import Reply, deps_of, ok, tenant

router = Router()


@router.get("/api/me/export")
def export_me() -> Reply:
    return ok(account.export(deps_of(router), tenant(router)))


@router.delete("/api/me")
def delete_me() -> Reply:
    return ok({"deleted": account.delete_everything(deps_of(router), tenant(router))})
