"""Use cases of long-term memory (agent and workspace scope), shared by the REST routes and the model's tools; and memory_recall over every scope."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engram.kernel.errors import BadRequest, Conflict, NotFound
from engram.kernel.ids import check_id
from engram.kernel.model import now_iso, page_ranked
from engram.kernel.textsearch import terms, text_query
from engram.kernel.validation import check_text, refuse_secrets
from engram.memory.models import Memory, MemoryUpdate, is_live, memory_id
from engram.memory.repository import memory_rank

if TYPE_CHECKING:
    from engram.agents.ports import Agents, Workspaces
    from engram.facts.ports import Facts
    from engram.memory.ports import Memories, MemoryStores


def _owner_exists(agents: Agents, workspaces: Workspaces, tenant: str, scope: str, owner_id: str) -> None:
    if scope == "agent":
        if agents.get(tenant, owner_id) is None:
            raise NotFound("agent not found", field="agentId")
    elif workspaces.get(tenant, owner_id) is None:
        raise NotFound("workspace not found", field="workspaceId")


def upsert_memory(
    deps: MemoryStores,
    tenant: str,
    *,
    scope: str,
    owner_id: str,
    key: str,
    value: str,
    source: str,
    fields: Mapping[str, object] | None = None,
    session_id: str | None = None,
    origin: Mapping[str, object] | None = None,
    owner_checked: bool = False,
    key_derived: bool = False,
) -> tuple[Memory, bool]:
    """Creates the row for (scope, owner, key) or updates it in place; returns (row, created). A key
    the caller derived from the value (`key_derived`, memory_store without a key) is not judged on
    its own: the value is (a slug joins words into something that can look like a token)."""
    s = deps.settings
    key = check_text("key", key, 1, s.memory_key_max_chars)
    value = check_text("value", value, 1, s.memory_value_max_chars)
    refuse_secrets("value", value, None if key_derived else key)
    fields = dict(fields or {})
    if not owner_checked:
        _owner_exists(deps.agents, deps.workspaces, tenant, scope, owner_id)
    mid = memory_id(scope, owner_id, key)
    existing = deps.memories.get(tenant, scope, owner_id, mid)
    now = now_iso()
    category = fields.get("category") or (existing.category if existing else "core")
    if category == "conversation" and not session_id:
        raise BadRequest("conversation memories belong to a chat session; the agent creates them", field="category")
    base: dict[str, Any] = existing.model_dump() if existing else {"id": mid, "created_at": now, "key": key, "scope": scope}
    base.update(
        {k: v for k, v in fields.items() if v is not None},
        value=value,
        source=source,
        category=category,
        updated_at=now,
        archived_at=None,
        archived_reason=None,
        superseded_by=None,
        session_id=session_id if category == "conversation" else None,
        expires_at=int(time.time()) + s.daily_memory_ttl_days * 86400 if category == "daily" else None,
        origin=origin or (existing.origin if existing else None),
    )
    memory = Memory.model_validate(base)
    if existing is None:
        deps.memories.create(tenant, memory, owner_id, limit=s.max_memories_per_scope)
    else:
        deps.memories.put(tenant, memory, owner_id, expect_updated_at=existing.updated_at)
    return memory, existing is None


def _list_rank(m: Memory) -> str:
    """LT3's list order as one string (fixed-width prefix, so string order is the order):
    agent scope pinned > importance desc > key asc (keys are unique per owner); workspace scope
    pinned > importance desc > updatedAt desc, the rank index's order."""
    if m.scope == "agent":
        return f"{0 if m.pinned else 1}#{100 - m.importance:03d}#{m.key}"
    return memory_rank(m)


def list_memories(
    agents: Agents,
    workspaces: Workspaces,
    memories: Memories,
    tenant: str,
    scope: str,
    owner_id: str,
    *,
    include_archived: bool = False,
    limit: int,
    token: str | None,
    q: str | None = None,
    sources: frozenset[str] = frozenset(),
) -> dict[str, object]:
    """One page of the owner's memories in LT3's order. The order is no index's (archived rows and
    director learnings are in none), so the owner's rows are read and ordered, and the page is cut
    after the token's rank: the response is bounded by `limit`, the read by the owner's rows.
    `q` keeps the rows whose key, value or topic match it (every row of the owner's, not a page),
    best match first as recall ranks them, then LT3's order; `sources` keeps those sources only."""
    _owner_exists(agents, workspaces, tenant, scope, owner_id)
    now = time.time()
    rows = [
        m
        for m in memories.all(tenant, scope, owner_id)
        if (include_archived or is_live(m, now)) and (not sources or m.source in sources)
    ]
    list_id = f"{scope}:{owner_id}" + (f"&source={','.join(sorted(sources))}" if sources else "")
    query = text_query(q)
    if query is None:
        return page_ranked(rows, _list_rank, list_id=list_id, limit=limit, token=token)
    scores = {m.id: query.score(m.key, m.value, m.topic) for m in rows}
    found = [m for m in rows if scores[m.id]]
    return page_ranked(
        found, lambda m: query.rank(scores[m.id], _list_rank(m)), list_id=query.list_id(list_id), limit=limit, token=token
    )


def _get(agents: Agents, workspaces: Workspaces, memories: Memories, tenant: str, scope: str, owner_id: str, mid: str) -> Memory:
    _owner_exists(agents, workspaces, tenant, scope, owner_id)
    memory = memories.get(tenant, scope, owner_id, check_id("memoryId", mid))
    if memory is None:
        raise NotFound("memory not found", field="memoryId")
    return memory


def update_memory(deps: MemoryStores, tenant: str, scope: str, owner_id: str, mid: str, body: MemoryUpdate) -> Memory:
    memory = _get(deps.agents, deps.workspaces, deps.memories, tenant, scope, owner_id, mid)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    if memory.source != "manual" and set(changes) - {"pinned"}:
        raise Conflict(
            f"{memory.source} memories are read-only; you can pin or delete them", field="source", code="memory_read_only"
        )
    for name in ("pinned", "importance", "category", "confidence"):
        if name in changes and changes[name] is None:
            raise BadRequest(f"{name} cannot be null", field=name)
    if changes.get("category") == "conversation":
        raise BadRequest("conversation memories belong to a chat session; the agent creates them", field="category")
    if "value" in changes:
        changes["value"] = check_text("value", changes["value"], 1, deps.settings.memory_value_max_chars)
        refuse_secrets("value", changes["value"])
    if "category" in changes:
        daily = changes["category"] == "daily"
        changes["expires_at"] = int(time.time()) + deps.settings.daily_memory_ttl_days * 86400 if daily else None
    updated = memory.model_copy(update={**changes, "updated_at": now_iso()})
    deps.memories.put(tenant, updated, owner_id, expect_updated_at=memory.updated_at)
    return updated


def pin_memory(
    agents: Agents, workspaces: Workspaces, memories: Memories, tenant: str, scope: str, owner_id: str, mid: str, pinned: bool
) -> Memory:
    memory = _get(agents, workspaces, memories, tenant, scope, owner_id, mid)
    updated = memory.model_copy(update={"pinned": pinned, "updated_at": now_iso()})
    memories.put(tenant, updated, owner_id, expect_updated_at=memory.updated_at)
    return updated


def delete_memory(
    agents: Agents, workspaces: Workspaces, memories: Memories, tenant: str, scope: str, owner_id: str, mid: str
) -> None:
    _owner_exists(agents, workspaces, tenant, scope, owner_id)
    memories.delete(tenant, scope, owner_id, check_id("memoryId", mid))


def archive_memory(memories: Memories, tenant: str, memory: Memory, owner_id: str, reason: str) -> Memory:
    archived = memory.model_copy(update={"archived_at": now_iso(), "archived_reason": reason, "updated_at": now_iso()})
    memories.put(tenant, archived, owner_id, expect_updated_at=memory.updated_at)
    return archived


def recall(
    memories: Memories,
    facts: Facts,
    tenant: str,
    *,
    agent_id: str,
    workspace_id: str | None,
    session_id: str,
    query: str,
    scopes: list[str],
    limit: int,
) -> list[dict[str, object]]:
    """Live memories of the given scopes that share words with the query, best first (an empty
    query lists the top rows): the agent's (`agent_id`), its workspace's (`workspace_id`, if it
    has one), the user's facts. Reads only this tenant's partitions."""
    wanted = terms(query)
    candidates: list[tuple[str, Any]] = []
    if "agent" in scopes:
        candidates += [("agent", m) for m in memories.all(tenant, "agent", agent_id)]
    if "workspace" in scopes and workspace_id:
        candidates += [("workspace", m) for m in memories.all(tenant, "workspace", workspace_id)]
    if "user" in scopes:
        candidates += [("user", f) for f in facts.all(tenant)]
    now = time.time()
    scored = []
    for scope, row in candidates:
        if scope == "user":
            if row.archived_at:
                continue
            text, key = row.fact, row.id
        else:
            if not is_live(row, now) or (row.category == "conversation" and row.session_id != session_id):
                continue
            text, key = f"{row.key} {row.value} {row.topic or ''}", row.key
        overlap = len(wanted & terms(text)) if wanted else 0
        if wanted and not overlap:
            continue
        importance = getattr(row, "importance", 0)
        scored.append((overlap, getattr(row, "pinned", False), importance, row.updated_at, scope, key, row))
    scored.sort(key=lambda r: (r[0], r[1], r[2], r[3]), reverse=True)
    out = []
    for _, _, _, _, scope, _key, row in scored[:limit]:
        if scope == "user":
            out.append({"scope": "user", "id": row.id, "fact": row.fact, "topic": row.topic, "confidence": row.confidence})
        else:
            out.append(
                {"scope": scope, "key": row.key, "value": row.value, "category": row.category, "importance": row.importance}
            )
    return out
