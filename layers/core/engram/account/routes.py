"""The caller's whole account: export it (a job writing a file), or delete all of it."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.account import service as account
from engram.api.http import Deps, Reply, SignedIn, Tenant, ok

router = Router()
# GET /api/me/export answers as before while the account is small, and says it is deprecated.
INLINE_EXPORT_DEPRECATED = {"Deprecation": "true", "Link": '</api/me/export>; rel="successor-version"'}


@router.post("/api/me/export")
def start_export(deps: Deps, tenant: Tenant) -> Reply:
    """202 with the new job, or with the one already in progress (one export at a time)."""
    job = account.start_export(deps.exports, deps.queues, deps.settings, tenant)
    return ok({**job.public(), "exportId": job.id}, 202, headers={"Location": f"/api/me/export/{job.id}"})


@router.get("/api/me/export/<exportId>")
def get_export(deps: Deps, tenant: Tenant, exportId: str) -> Reply:
    return ok(account.export_status(deps.exports, deps.export_objects, deps.settings, tenant, exportId))


@router.get("/api/me/export")
def export_inline(deps: Deps, tenant: Tenant) -> Reply:
    """Deprecated: the whole account in one response while it is small (see start_export)."""
    return ok(account.inline_export(deps, tenant), headers=INLINE_EXPORT_DEPRECATED)


@router.delete("/api/me")
def delete_me(deps: Deps, who: SignedIn) -> Reply:
    # Not with an API key: a leaked key must not be able to erase the account.
    return ok({"deleted": account.delete_everything(deps, who.tenant)})
