"""The caller's whole account: export it, or delete all of it."""

from __future__ import annotations


from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import deps_of, ok, tenant
from engram.account import service as account

router = Router()


@router.get("/api/me/export")
def export_me():
    return ok(account.export(deps_of(router), tenant(router)))


@router.delete("/api/me")
def delete_me():
    return ok({"deleted": account.delete_everything(deps_of(router), tenant(router))})
