"""Searching the conversation archive from the API (CM8): the same search `conversation_search`
gives the model, so a person finds what was said before the history cap cut it."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from engram.agents.service import get_agent
from engram.kernel.errors import BadRequest
from engram.kernel.model import page_ranked

if TYPE_CHECKING:
    from engram.agents.ports import Agents
    from engram.recall.ports import Archive

SEARCH_HITS = 100  # the best hits of a query, paged by `limit`
QUERY_MAX_CHARS = 500


def search_archive(
    agents: Agents, archive: Archive, tenant: str, agent_id: str, q: str | None, *, limit: int, token: str | None
) -> dict[str, object]:
    """`GET /api/agents/{agentId}/archive/search?q=`: the agent's archived messages (every
    session) best first, each with its session, role, text, time and score; paged over the best
    SEARCH_HITS (a token is only good for the query that issued it)."""
    query = (q or "").strip()
    if not query:
        raise BadRequest("q is required: the words to look for", field="q", code="missing_query")
    if len(query) > QUERY_MAX_CHARS:
        raise BadRequest(f"q is longer than {QUERY_MAX_CHARS} characters", field="q")
    get_agent(agents, tenant, agent_id)
    # The search index is loaded with the first search, not with the api function (cold start).
    from engram.recall.index import conversation_search

    hits = conversation_search(archive, tenant, agent_id, query, limit=SEARCH_HITS)
    ranked = [{**hit, "_rank": f"{i:04d}"} for i, hit in enumerate(hits)]
    digest = hashlib.sha256(query.encode()).hexdigest()[:16]
    out = page_ranked(ranked, lambda hit: str(hit["_rank"]), list_id=f"archive:{agent_id}:{digest}", limit=limit, token=token)
    out["items"] = [{k: v for k, v in hit.items() if k != "_rank"} for hit in out["items"]]
    return out
