"""Use cases of long-term memory and user facts, shared by the REST routes and the model's tools."""

from __future__ import annotations

import re
import time
from typing import Any

from .deps import Deps
from .errors import BadRequest, Conflict, NotFound, PayloadTooLarge
from .ids import check_id, new_id
from .memory.secrets import find_secret
from .models import Fact, FactCreate, FactUpdate, Memory, MemoryCreate, MemoryUpdate, now_iso
from .stores.memories import is_live, memory_id

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be by did do does for from has have i in is it me my of on or our so that the this to was we what when where which who with you your".split())


# --- validation shared by every write path ------------------------------------------------
def check_text(field: str, text: str, lo: int, hi: int) -> str:
    text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or len(text) < lo:
        raise BadRequest(f"{field} must be at least {lo} character(s)", field=field)
    if len(text) > hi:
        raise PayloadTooLarge(f"{field} is {len(text)} characters; the limit is {hi}", field=field, code="value_too_long")
    return text


def refuse_secrets(field: str, *texts: str | None) -> None:
    for text in texts:
        kind = find_secret(text or "")
        if kind:
            raise BadRequest(f"{field} looks like it contains {kind}; secrets are never stored in memory", field=field, code="secret_detected")


def _owner_exists(deps: Deps, t: str, scope: str, owner_id: str) -> None:
    if scope == "agent":
        if deps.table.get_agent(t, owner_id) is None:
            raise NotFound("agent not found", field="agentId")
    elif deps.table.get_workspace(t, owner_id) is None:
        raise NotFound("workspace not found", field="workspaceId")


# --- memories -----------------------------------------------------------------------------
def upsert_memory(
    deps: Deps,
    t: str,
    *,
    scope: str,
    owner_id: str,
    key: str,
    value: str,
    source: str,
    fields: dict[str, Any] | None = None,
    session_id: str | None = None,
    origin: dict[str, Any] | None = None,
    owner_checked: bool = False,
) -> tuple[Memory, bool]:
    """Creates the row for (scope, owner, key) or updates it in place; returns (row, created)."""
    s = deps.settings
    key = check_text("key", key, 1, s.memory_key_max_chars)
    value = check_text("value", value, 1, s.memory_value_max_chars)
    refuse_secrets("value", key, value)
    fields = dict(fields or {})
    if not owner_checked:
        _owner_exists(deps, t, scope, owner_id)
    mid = memory_id(scope, owner_id, key)
    existing = deps.memories.get_memory(t, scope, owner_id, mid)
    now = now_iso()
    category = fields.get("category") or (existing.category if existing else "core")
    if category == "conversation" and not session_id:
        raise BadRequest("conversation memories belong to a chat session; the agent creates them", field="category")
    base = existing.model_dump() if existing else {"id": mid, "created_at": now, "key": key, "scope": scope}
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
    deps.memories.put_memory(t, memory, owner_id, expect_updated_at=existing.updated_at if existing else None)
    return memory, existing is None


def _sorted_for_list(rows: list[Memory], scope: str) -> list[Memory]:
    if scope == "agent":  # LT3: pinned > importance desc > key asc
        return sorted(rows, key=lambda m: (not m.pinned, -m.importance, m.key))
    # workspace: pinned > importance desc > updatedAt desc
    return sorted(sorted(rows, key=lambda m: m.updated_at, reverse=True), key=lambda m: (not m.pinned, -m.importance))


def list_memories(deps: Deps, t: str, scope: str, owner_id: str, *, include_archived: bool = False) -> list[Memory]:
    _owner_exists(deps, t, scope, owner_id)
    now = time.time()
    rows = [m for m in deps.memories.list_memories(t, scope, owner_id) if include_archived or is_live(m, now)]
    return _sorted_for_list(rows, scope)


def _get(deps: Deps, t: str, scope: str, owner_id: str, mid: str) -> Memory:
    _owner_exists(deps, t, scope, owner_id)
    memory = deps.memories.get_memory(t, scope, owner_id, check_id("memoryId", mid))
    if memory is None:
        raise NotFound("memory not found", field="memoryId")
    return memory


def update_memory(deps: Deps, t: str, scope: str, owner_id: str, mid: str, body: MemoryUpdate) -> Memory:
    memory = _get(deps, t, scope, owner_id, mid)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    if memory.source != "manual" and set(changes) - {"pinned"}:
        raise Conflict(f"{memory.source} memories are read-only; you can pin or delete them", field="source", code="memory_read_only")
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
    deps.memories.put_memory(t, updated, owner_id, expect_updated_at=memory.updated_at)
    return updated


def pin_memory(deps: Deps, t: str, scope: str, owner_id: str, mid: str, pinned: bool) -> Memory:
    memory = _get(deps, t, scope, owner_id, mid)
    updated = memory.model_copy(update={"pinned": pinned, "updated_at": now_iso()})
    deps.memories.put_memory(t, updated, owner_id, expect_updated_at=memory.updated_at)
    return updated


def delete_memory(deps: Deps, t: str, scope: str, owner_id: str, mid: str) -> None:
    _owner_exists(deps, t, scope, owner_id)
    deps.memories.delete_memory(t, scope, owner_id, check_id("memoryId", mid))


def archive_memory(deps: Deps, t: str, memory: Memory, owner_id: str, reason: str) -> Memory:
    archived = memory.model_copy(update={"archived_at": now_iso(), "archived_reason": reason, "updated_at": now_iso()})
    deps.memories.put_memory(t, archived, owner_id, expect_updated_at=memory.updated_at)
    return archived


# --- facts --------------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def add_fact(
    deps: Deps, t: str, text: str, *, source: str, confidence: str, topic: str | None = None, origin: dict[str, Any] | None = None
) -> tuple[Fact, bool]:
    """Adds a fact (referenced at creation, so it can enter the prompt's top 10 at once).
    Restating an active fact refreshes it instead of duplicating it."""
    s = deps.settings
    text = check_text("fact", text, s.fact_min_chars, s.fact_max_chars)
    refuse_secrets("fact", text)
    now = now_iso()
    for existing in deps.memories.list_facts(t):
        if existing.archived_at is None and _norm(existing.fact) == _norm(text):
            refreshed = existing.model_copy(update={"last_referenced_at": now, "updated_at": now, "topic": topic or existing.topic})
            if confidence == "asserted":
                refreshed = refreshed.model_copy(update={"confidence": "asserted"})
            deps.memories.put_fact(t, refreshed, expect_updated_at=existing.updated_at)
            return refreshed, False
    fact = Fact(id=new_id("f"), created_at=now, updated_at=now, fact=text, source=source, confidence=confidence,
                topic=topic, last_referenced_at=now, origin=origin)  # type: ignore[arg-type]
    deps.memories.put_fact(t, fact)
    return fact, True


def list_facts(deps: Deps, t: str, *, include_archived: bool = False) -> list[Fact]:
    rows = [f for f in deps.memories.list_facts(t) if include_archived or f.archived_at is None]
    # Active first, then most recently referenced: the order the prompt picks them in.
    return sorted(rows, key=lambda f: (f.archived_at is None, f.last_referenced_at or f.created_at), reverse=True)


def get_fact(deps: Deps, t: str, fact_id: str) -> Fact:
    fact = deps.memories.get_fact(t, check_id("factId", fact_id))
    if fact is None:
        raise NotFound("fact not found", field="factId")
    return fact


def update_fact(deps: Deps, t: str, fact_id: str, body: FactUpdate) -> Fact:
    fact = get_fact(deps, t, fact_id)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    if "fact" in changes:
        if changes["fact"] is None:
            raise BadRequest("fact cannot be null", field="fact")
        changes["fact"] = check_text("fact", changes["fact"], deps.settings.fact_min_chars, deps.settings.fact_max_chars)
        refuse_secrets("fact", changes["fact"])
    if "confidence" in changes and changes["confidence"] is None:
        raise BadRequest("confidence cannot be null", field="confidence")
    archived = changes.pop("archived", None)
    reason = changes.pop("archived_reason", None)
    now = now_iso()
    if archived is True:
        changes.update(archived_at=fact.archived_at or now, archived_reason=reason or "user_deleted")
    elif archived is False:
        changes.update(archived_at=None, archived_reason=None, last_referenced_at=now)
    elif reason is not None:
        raise BadRequest("archivedReason goes with archived: true", field="archivedReason")
    updated = fact.model_copy(update={**changes, "updated_at": now})
    deps.memories.put_fact(t, updated, expect_updated_at=fact.updated_at)
    return updated


def archive_fact(deps: Deps, t: str, fact_id: str, reason: str) -> Fact:
    fact = get_fact(deps, t, fact_id)
    if fact.archived_at:
        return fact
    now = now_iso()
    archived = fact.model_copy(update={"archived_at": now, "archived_reason": reason, "updated_at": now})
    deps.memories.put_fact(t, archived, expect_updated_at=fact.updated_at)
    return archived


# --- recall (the model's memory_recall) ---------------------------------------------------
def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def recall(deps: Deps, t: str, *, agent: Any, session_id: str, query: str, scopes: list[str], limit: int) -> list[dict[str, Any]]:
    """Live memories of the given scopes that share words with the query, best first (an empty
    query lists the top rows). Reads only this tenant's partitions."""
    wanted = _terms(query)
    candidates: list[tuple[str, Any]] = []
    if "agent" in scopes:
        candidates += [("agent", m) for m in deps.memories.list_memories(t, "agent", agent.id)]
    if "workspace" in scopes and agent.workspace_id:
        candidates += [("workspace", m) for m in deps.memories.list_memories(t, "workspace", agent.workspace_id)]
    if "user" in scopes:
        candidates += [("user", f) for f in deps.memories.list_facts(t)]
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
        overlap = len(wanted & _terms(text)) if wanted else 0
        if wanted and not overlap:
            continue
        importance = getattr(row, "importance", 0)
        scored.append((overlap, getattr(row, "pinned", False), importance, row.updated_at, scope, key, row))
    scored.sort(key=lambda r: (r[0], r[1], r[2], r[3]), reverse=True)
    out = []
    for _, _, _, _, scope, key, row in scored[:limit]:
        if scope == "user":
            out.append({"scope": "user", "id": row.id, "fact": row.fact, "topic": row.topic, "confidence": row.confidence})
        else:
            out.append({"scope": scope, "key": row.key, "value": row.value, "category": row.category, "importance": row.importance})
    return out
