"""Run memory tools (RM2) and `store_learning` (RM4), offered only in runs that have a run memory.

Progressive disclosure: `memory_list` shows what is there (metadata only), `memory_read` fetches the
values the agent actually needs, `memory_write` publishes under `shared:`. Only `shared:` is
writable by a model: `input:`, `step:` and `task:` belong to the run engine, so an agent cannot
spoof another's result.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, Field, StringConstraints

from engram.engine.tools import Tool, ToolContext, ToolOutcome, ToolRegistry, refuse_secrets_of_the_turn
from engram.run_memory.learnings import store_learning
from engram.run_memory.models import Kind
from engram.run_memory.store import RunScratchpad, run_memory_of
from engram.wiring.stores import stores_of

MEMORY_LIST = "memory_list"
MEMORY_READ = "memory_read"
MEMORY_WRITE = "memory_write"
STORE_LEARNING = "store_learning"
READ_MAX_KEYS = 50

_NAMESPACED = re.compile(r"^[^:\s]+:")


def _memory(ctx: ToolContext) -> RunScratchpad:
    memory = run_memory_of(ctx)
    assert memory is not None  # the tools are only offered with a run memory
    return memory


def _has_run_memory(ctx: ToolContext) -> bool:
    return run_memory_of(ctx) is not None


def _is_lead(ctx: ToolContext) -> bool:
    return run_memory_of(ctx) is not None and bool(ctx.agent.team)


# --- memory_list --------------------------------------------------------------------------------
class ListInput(BaseModel):
    kind: Kind | list[Kind] | None = Field(
        None, description="Only entries of this kind (or these kinds): input, step_result, task_result, shared."
    )
    key_prefix: Annotated[str, StringConstraints(max_length=130)] | None = Field(
        None, description="Only keys starting with this, e.g. `task:`."
    )
    sources: Annotated[list[Annotated[str, StringConstraints(max_length=200)]], Field(max_length=50)] | None = Field(
        None, description="Only entries written by these sources (task, step or agent ids)."
    )


def _list(ctx: ToolContext, inp: ListInput) -> object:
    cap = ctx.settings.run_memory_list_cap
    found = _memory(ctx).list(kind=inp.kind, key_prefix=inp.key_prefix, sources=inp.sources)
    shown = found[-cap:]  # the newest `cap`, still in createdAt order
    return {
        "total": len(found),
        "returned": len(shown),
        "truncated": len(found) > len(shown),
        "entries": [e.meta() for e in shown],
    }


# --- memory_read --------------------------------------------------------------------------------
class ReadInput(BaseModel):
    keys: Annotated[list[str], Field(min_length=1, max_length=READ_MAX_KEYS)] = Field(
        description="The keys to fetch, as memory_list or the task message shows them (e.g. `task:ag_1`, `shared:plan`)."
    )


def _read(ctx: ToolContext, inp: ReadInput) -> object:
    entries: dict[str, Any] = {}
    missing: list[str] = []
    for key in dict.fromkeys(inp.keys):
        entry = _memory(ctx).get(key)
        if entry is None:
            missing.append(key)
        else:
            entries[key] = entry.public()
    return {"entries": entries, "missing": missing}


_READ_HEADER = re.compile(r"memory_read")
_LISTED_KEY = re.compile(r"^\s*[-*]\s+((?:task|shared|input|step):[A-Za-z0-9_.:-]{1,120})(?:\s+[—–-]\s+.*)?\s*$")


def _read_intent(text: str) -> dict[str, object] | None:
    """The keys listed under a line that mentions memory_read (the lead's upstream hint)."""
    keys: list[str] = []
    listing = False
    for line in text.splitlines():
        if _READ_HEADER.search(line):
            listing = True
            continue
        if not listing:
            continue
        match = _LISTED_KEY.match(line)
        if match:
            keys.append(match.group(1))
        elif line.strip() and keys:
            listing = False  # the list ended
    keys = list(dict.fromkeys(keys))[:READ_MAX_KEYS]
    return {"keys": keys} if keys else None


# --- memory_write -------------------------------------------------------------------------------
class WriteInput(BaseModel):
    key: Annotated[str, StringConstraints(min_length=1, max_length=127)] = Field(
        description="A short name; stored as `shared:<key>` (passing `shared:<key>` is the same)."
    )
    value: Any = Field(description="Any JSON value.")
    title: Annotated[str, StringConstraints(max_length=200)] | None = Field(None, description="A short label memory_list shows.")
    description: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        None, description="One sentence on what the value is."
    )


def _write(ctx: ToolContext, inp: WriteInput) -> object:
    key = inp.key.strip()
    if not key.startswith("shared:"):
        if _NAMESPACED.match(key):
            return ToolOutcome(
                f"memory_write only writes shared: keys; {key.split(':', 1)[0]}: entries belong to the run "
                "(inputs, step and task results) and cannot be written by an agent. Use a key like "
                f"`shared:{key.split(':', 1)[1] or 'name'}` to publish your own value.",
                is_error=True,
            )
        key = f"shared:{key}"
    # A bad name or a secret (secret_detected) is a BadRequest, an oversize value PayloadTooLarge:
    # error results the model can fix.
    refuse_secrets_of_the_turn(ctx, "value", json.dumps(inp.value, ensure_ascii=False), inp.title, inp.description)
    entry = _memory(ctx).set(key, "shared", inp.value, source=ctx.agent.id, title=inp.title, description=inp.description)
    return {"ok": True, "key": entry.key, "kind": entry.kind, "createdAt": entry.created_at}


# --- store_learning -----------------------------------------------------------------------------
class LearningInput(BaseModel):
    learning: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="One insight worth carrying into this team's future runs, in a sentence or two."
    )


def _store_learning(ctx: ToolContext, inp: LearningInput) -> object:
    refuse_secrets_of_the_turn(ctx, "learning", inp.learning)
    origin = {"runId": ctx.run_id, "agentId": ctx.agent.id, "sessionId": ctx.session_id or None}
    stores = stores_of(ctx)
    row = store_learning(stores.memories, stores.settings, ctx.tenant, ctx.agent.id, inp.learning, origin=origin)
    return {"stored": True, "key": row.key}


_LEARNING_LINE = re.compile(r"^\s*Learning:\s*(\S.*?)\s*$", re.M)


def _learning_intent(text: str) -> dict[str, object] | None:
    match = _LEARNING_LINE.search(text)
    return {"learning": match.group(1)} if match else None


_TOOLS = (
    (
        MEMORY_LIST,
        ListInput,
        _list,
        None,
        _has_run_memory,
        "List what this run's shared memory holds: metadata only (key, kind, title, source, valueBytes), no values. "
        "Call it first to discover inputs, other agents' results and shared values; narrow with kind, key_prefix or "
        "sources. Shows the newest 200 at most (truncated: true when there are more).",
    ),
    (
        MEMORY_READ,
        ReadInput,
        _read,
        _read_intent,
        _has_run_memory,
        "Fetch the full values of specific run memory keys (up to 50). Read only what you need; keys that do not "
        "exist come back in `missing`.",
    ),
    (
        MEMORY_WRITE,
        WriteInput,
        _write,
        None,
        _has_run_memory,
        "Publish a JSON value to this run's memory under `shared:<key>` so the other agents of the run can find it "
        "with memory_list. Only shared: keys are writable; writing the same key again replaces the value.",
    ),
    (
        STORE_LEARNING,
        LearningInput,
        _store_learning,
        _learning_intent,
        _is_lead,
        "As the lead of this team, store an insight you gained during this run (a lesson, not a result); the newest "
        "learnings are shown to you at the start of future runs. Never store secrets.",
    ),
)


def register_tools(registry: ToolRegistry) -> None:
    for name, model, handler, intent, enabled, description in _TOOLS:
        registry.register(Tool(name, description, model, handler, offline_intent=intent, enabled=enabled))
