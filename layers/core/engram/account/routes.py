"""The caller's whole account: export it, or delete all of it."""

from __future__ import annotations


from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import ok, tenant
from engram.deps import get_deps
from engram.account import service as account

router = Router()


@router.get("/api/me/export")
def export_me():
    return ok(account.export(get_deps(), tenant(router)))


@router.delete("/api/me")
def delete_me():
    return ok({"deleted": account.delete_everything(get_deps(), tenant(router))})
