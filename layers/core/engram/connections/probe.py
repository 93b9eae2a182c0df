"""Testing a connection: list the server's tools now (and cache them), or name what went wrong."""

from __future__ import annotations

import time

from engram.aws.kms import SealedValueUnreadable
from engram.connections import oauth
from engram.connections.models import HealthError
from engram.connections.source import refresh_tools
from engram.connections.tools import McpToolDeps
from engram.kernel.errors import EngramError, NotFound
from engram.kernel.ids import check_id


def test_connection(deps: McpToolDeps, tenant: str, connection_id: str, base: str | None = None) -> dict[str, object]:
    """`{ok: true, tools, durationMs}`, or `{ok: false, error: {code, message}}` naming the problem
    (unreachable, unauthorized, tls_error, not_mcp, timeout, invalid_tool_schema, egress_refused, ...)."""
    from engram.connections.mcp_http import McpFailure, failure_of

    found = deps.connections.get_with_secret(tenant, check_id("connectionId", connection_id))
    if found is None:
        raise NotFound("connection not found", field="connectionId")
    connection, sealed = found
    started = time.monotonic()
    try:
        # Bounded like a sync turn (the answer must come before API Gateway's 30 s); a success resets
        # the server's health.
        listed, _health = refresh_tools(deps, tenant, connection, sealed, deadline=started + deps.settings.sync_turn_budget_s)
    except oauth.NeedsAuthorization as err:  # TL9: with the URL to authorise it (discovered now if need be)
        return {
            "ok": False,
            "error": {"code": err.code, "message": err.message},
            "authorization": _authorization(deps, tenant, connection_id, base),
            "durationMs": _ms(started),
        }
    except SealedValueUnreadable:
        problem = McpFailure("unauthorized", "the stored auth value could not be read; set it again")
        return {"ok": False, "error": {"code": problem.code, "message": problem.message}, "durationMs": _ms(started)}
    except Exception as err:  # McpFailure and whatever the SDK raised, named
        problem = failure_of(err)
        return {"ok": False, "error": {"code": problem.code, "message": problem.message}, "durationMs": _ms(started)}
    if isinstance(listed, HealthError):
        return {"ok": False, "error": {"code": listed.code, "message": listed.message}, "durationMs": _ms(started)}
    return {"ok": True, **listed.public(), "durationMs": _ms(started)}


def _authorization(deps: McpToolDeps, tenant: str, connection_id: str, base: str | None) -> dict[str, object] | None:
    row = deps.connections.oauth_row(tenant, connection_id)
    if row is None:
        return None
    if row.server is None and base is not None:
        try:
            oauth.prepare(deps, tenant, row, base)
        except EngramError as err:  # discovery failed: the test says why, with the start route
            return {**(oauth.pending(deps, tenant, row.connection) or {}), "error": {"code": err.code, "message": err.message}}
    return oauth.pending(deps, tenant, row.connection)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
