"""The model's long-term memory tools: memory_store, memory_recall, memory_forget, and for user
facts remember and forget (memory_store/memory_forget with scope user)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from engram.engine.timeline import memory_write_span
from engram.engine.tools import Tool, ToolContext, ToolOutcome, ToolRegistry, refuse_secrets_of_the_turn
from engram.facts import service as facts
from engram.kernel.textsearch import terms
from engram.memory import service as memory_service
from engram.memory.models import MemoryScope, memory_id
from engram.wiring.stores import stores_of


def slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "note"


def _origin(ctx: ToolContext) -> dict[str, object]:
    return {"runId": ctx.run_id, "sessionId": ctx.session_id, "agentId": ctx.agent.id}


# --- memory_store -------------------------------------------------------------------------------
class StoreInput(BaseModel):
    value: Annotated[str, StringConstraints(min_length=1)] = Field(description="The fact itself, short and self-contained.")
    key: str | None = Field(
        None, description="A short stable slug, unique in its scope; re-using it updates the row. Not used for scope user."
    )
    scope: MemoryScope = Field(
        "agent",
        description="agent: about how this agent works; workspace: project facts every agent of the workspace needs; user: a fact about the user.",
    )
    category: Literal["core", "daily", "conversation"] = Field(
        "core", description="core: permanent; daily: expires after some days; conversation: only for this chat session."
    )
    importance: Annotated[int, Field(ge=0, le=100)] = 50
    topic: Annotated[str, StringConstraints(max_length=40)] | None = None
    confidence: Literal["asserted", "inferred"] = Field(
        "asserted", description="asserted: stated outright; inferred: your interpretation."
    )


def _store(ctx: ToolContext, inp: StoreInput) -> object:
    deps, tenant, agent = stores_of(ctx), ctx.tenant, ctx.agent
    refuse_secrets_of_the_turn(ctx, "value", inp.value, inp.key)
    if inp.scope == "user":
        with memory_write_span(ctx, "user", "store"):
            fact, created = facts.add_fact(
                deps.facts,
                deps.settings,
                tenant,
                inp.value,
                source="chat",
                confidence=inp.confidence,
                topic=inp.topic,
                origin=_origin(ctx),
            )
        return {"stored": "user fact", "factId": fact.id, "created": created}
    if inp.scope == "workspace" and not agent.workspace_id:
        return ToolOutcome("this agent has no workspace; use scope agent or user", is_error=True)
    owner = (agent.workspace_id if inp.scope == "workspace" else agent.id) or ""  # a workspace was checked above
    key = inp.key or slug(inp.value)
    with memory_write_span(ctx, inp.scope, "store"):
        row, created = memory_service.upsert_memory(
            deps,
            tenant,
            scope=inp.scope,
            owner_id=owner,
            key=key,
            value=inp.value,
            source="chat",
            fields={"category": inp.category, "importance": inp.importance, "topic": inp.topic, "confidence": inp.confidence},
            session_id=ctx.session_id,
            origin=_origin(ctx),
            owner_checked=True,
            key_derived=inp.key is None,
        )
    out: dict[str, Any] = {"stored": f"{inp.scope} memory", "key": row.key, "created": created}
    if inp.scope == "agent" and not agent.agent_memory:
        out["note"] = "agent memory is off for this agent: the row is kept and recallable, but not injected into prompts"
    return out


_WORKSPACE_NOTE = re.compile(
    r"^\s*(?:please\s+)?(?:note for the (?:workspace|team)|remember for the (?:workspace|team))(?: that)?[:,]?\s+(.{3,})$",
    re.I | re.S,
)


def _store_intent(text: str) -> dict[str, object] | None:
    match = _WORKSPACE_NOTE.match(text)
    return {"value": match.group(1).strip().rstrip("."), "scope": "workspace"} if match else None


# --- memory_recall ------------------------------------------------------------------------------
class RecallInput(BaseModel):
    query: Annotated[str, StringConstraints(max_length=500)] = Field(
        "", description="Words to look for; empty lists the most important rows."
    )
    scope: Literal["agent", "workspace", "user", "all"] = "all"
    limit: Annotated[int, Field(ge=1, le=20)] = 10


def _recall(ctx: ToolContext, inp: RecallInput) -> object:
    scopes: list[str] = ["agent", "workspace", "user"] if inp.scope == "all" else [inp.scope]
    stores = stores_of(ctx)
    hits = memory_service.recall(
        stores.memories,
        stores.facts,
        ctx.tenant,
        agent_id=ctx.agent.id,
        workspace_id=ctx.agent.workspace_id,
        session_id=ctx.session_id,
        query=inp.query,
        scopes=scopes,
        limit=inp.limit,
    )
    return hits or "no matching memories"


_RECALL = re.compile(r"^\s*(?:what do you (?:remember|know) about|recall)\s+(?!me\b)(.{2,}?)\s*\??$", re.I)


def _recall_intent(text: str) -> dict[str, object] | None:
    match = _RECALL.match(text)
    return {"query": match.group(1)} if match else None


# --- memory_forget ------------------------------------------------------------------------------
class ForgetMemoryInput(BaseModel):
    key: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    fact_id: str | None = None
    scope: MemoryScope = "agent"


def _forget_memory(ctx: ToolContext, inp: ForgetMemoryInput) -> object:
    deps, tenant, agent = stores_of(ctx), ctx.tenant, ctx.agent
    if inp.scope == "user":
        if not inp.fact_id:
            return ToolOutcome("fact_id is required for scope user", is_error=True)
        with memory_write_span(ctx, "user", "forget"):
            fact = facts.archive_fact(deps.facts, tenant, inp.fact_id, "agent_forget")
        return {"archived": fact.id}
    if not inp.key:
        return ToolOutcome("key is required for scope agent or workspace", is_error=True)
    owner = agent.workspace_id if inp.scope == "workspace" else agent.id
    if not owner:
        return ToolOutcome("this agent has no workspace", is_error=True)
    row = deps.memories.get(tenant, inp.scope, owner, memory_id(inp.scope, owner, inp.key))
    if row is None or row.archived_at:
        return ToolOutcome(f"no active {inp.scope} memory with key {inp.key!r}", is_error=True)
    with memory_write_span(ctx, inp.scope, "forget"):
        memory_service.archive_memory(deps.memories, tenant, row, owner, "agent_forget")
    return {"archived": row.key}


# --- remember / forget (user facts) ---------------------------------------------------------------
class RememberInput(BaseModel):
    fact: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="One durable fact about the user, in a short sentence."
    )
    topic: Annotated[str, StringConstraints(max_length=40)] | None = Field(
        None, description="A short tag: risk, goal, preference, ..."
    )
    confidence: Literal["asserted", "inferred"] = Field("inferred", description="asserted when the user said it outright.")


def _remember(ctx: ToolContext, inp: RememberInput) -> object:
    refuse_secrets_of_the_turn(ctx, "fact", inp.fact)
    with memory_write_span(ctx, "user", "remember"):
        stores = stores_of(ctx)
        fact, created = facts.add_fact(
            stores.facts,
            stores.settings,
            ctx.tenant,
            inp.fact,
            source="chat",
            confidence=inp.confidence,
            topic=inp.topic,
            origin=_origin(ctx),
        )
    return {"factId": fact.id, "created": created}


_REMEMBER = re.compile(r"^\s*(?:please\s+)?remember(?!\s+for the (?:workspace|team))(?:\s+that)?[:,]?\s+(.{3,})$", re.I | re.S)


def _remember_intent(text: str) -> dict[str, object] | None:
    match = _REMEMBER.match(text)
    return {"fact": match.group(1).strip().rstrip("."), "confidence": "asserted"} if match else None


class ForgetInput(BaseModel):
    fact_id: str | None = Field(None, description="The id shown after the fact in 'What I know about you'.")
    fact: str | None = Field(None, description="Or the fact's text, when you do not have its id.")
    reason: Literal["agent_forget", "user_corrected"] = "agent_forget"


def _forget(ctx: ToolContext, inp: ForgetInput) -> object:
    deps, tenant = stores_of(ctx), ctx.tenant
    fact_id = inp.fact_id
    if not fact_id and inp.fact:
        wanted = terms(inp.fact)
        best = max(
            ((len(wanted & terms(f.fact)), f) for f in deps.facts.all(tenant) if f.archived_at is None),
            key=lambda pair: pair[0],
            default=(0, None),
        )
        fact_id = best[1].id if best[1] is not None and best[0] > 0 else None
    if not fact_id:
        return ToolOutcome("no matching fact: give fact_id or the fact's text", is_error=True)
    with memory_write_span(ctx, "user", "forget"):
        archived = facts.archive_fact(deps.facts, tenant, fact_id, inp.reason)
    return {"archived": archived.id, "fact": archived.fact}


_FORGET = re.compile(r"^\s*(?:please\s+)?forget(?:\s+that)?\s+(.{3,}?)\.?$", re.I | re.S)


def _forget_intent(text: str) -> dict[str, object] | None:
    match = _FORGET.match(text)
    return {"fact": match.group(1)} if match else None


def register_tools(registry: ToolRegistry) -> None:
    """Order matters for the offline model: the more specific phrasings are tried first."""
    registry.register(
        Tool(
            "memory_store",
            (
                "Store a durable memory: stable facts, conventions, preferences, where things live. Never one-off task details, "
                "transient state or secret values. Re-using a key updates the row. scope user stores a fact about the user."
            ),
            StoreInput,
            _store,
            offline_intent=_store_intent,
        )
    )
    registry.register(
        Tool(
            "memory_recall",
            "Search stored memories (agent, workspace and user facts) by words.",
            RecallInput,
            _recall,
            offline_intent=_recall_intent,
        )
    )
    registry.register(
        Tool(
            "memory_forget",
            "Archive a memory by key (or a user fact by id with scope user). It stays visible to the user as archived.",
            ForgetMemoryInput,
            _forget_memory,
        )
    )
    registry.register(
        Tool(
            "remember",
            (
                "Remember a fact about the user for future sessions: preferences, goals, constraints, recurring context. "
                "Not ephemeral details. Prefer precise facts; use confidence inferred when unsure."
            ),
            RememberInput,
            _remember,
            offline_intent=_remember_intent,
        )
    )
    registry.register(
        Tool(
            "forget",
            "Archive a fact about the user (when they correct or withdraw it).",
            ForgetInput,
            _forget,
            offline_intent=_forget_intent,
        )
    )
