"""GET /api/usage: usage rows with totals."""

from __future__ import annotations

from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id
from engram.kernel.model import page
from engram.wiring.stores import Stores


def list_usage(
    deps: Stores, tenant: str, agent_id: str | None, session_id: str | None, limit: int, token: str | None
) -> dict[str, object]:
    if session_id and not agent_id:
        raise BadRequest("sessionId filters need agentId (session ids are per agent)", field="agentId", code="missing_filter")
    if agent_id:
        check_id("agentId", agent_id)
    rows, nxt = deps.usage.page(tenant, agent_id=agent_id, session_key=session_id, limit=limit, token=token)
    totals = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0}
    for row in rows:
        data = row.public()
        for k in totals:
            totals[k] += data[k]
    totals["costUsd"] = round(totals["costUsd"], 8)
    return {**page(rows, nxt), "totals": totals}
