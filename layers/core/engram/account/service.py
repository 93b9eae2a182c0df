"""The caller's whole account: export everything stored about them, or delete all of it."""

from __future__ import annotations

from typing import Any, Callable

from engram.deps import Deps
from engram.kernel.model import now_iso
from engram.aws import keys


def _every_page(fetch: Callable[..., tuple[list[Any], str | None]]) -> list[Any]:
    items, token = fetch(limit=100, token=None)
    while token:
        more, token = fetch(limit=100, token=token)
        items += more
    return items


def _all_agents(deps: Deps, t: str) -> list[Any]:
    return _every_page(lambda **page: deps.table.list_agents(t, **page))


def _all_workspaces(deps: Deps, t: str) -> list[Any]:
    return _every_page(lambda **page: deps.table.list_workspaces(t, **page))


def export(deps: Deps, t: str) -> dict[str, Any]:
    """Everything stored for the caller, as JSON (webhook secrets excluded)."""
    from engram.run_memory.repository import RunMemoryStore

    run_memory = RunMemoryStore(deps.table)
    agents_out = []
    runs_out: list[dict[str, Any]] = []
    for agent in _all_agents(deps, t):
        sessions = _every_page(lambda **page: deps.table.list_sessions(t, agent.id, **page))
        runs = _every_page(lambda **page: deps.table.list_runs(t, agent.id, **page))
        runs_out += [r.public() for r in runs]
        agents_out.append(
            {
                **agent.public(),
                "sessions": [{**s.public(), "messages": deps.history.load(t, agent.id, s.id).messages} for s in sessions],
                "memories": [m.public() for m in deps.memories.list_memories(t, "agent", agent.id)],
                "runMemory": [{"runId": run_id, **entry.public()} for run_id, entry in run_memory.agent_entries(t, agent.id)],
            }
        )
    workspaces_out = [
        {**ws.public(), "memories": [m.public() for m in deps.memories.list_memories(t, "workspace", ws.id)]}
        for ws in _all_workspaces(deps, t)
    ]
    usage = deps.table._query_all(keys.usage_pk(t))
    card_types, token = deps.table.list_card_types(t, limit=100, token=None)
    while token:
        more, token = deps.table.list_card_types(t, limit=100, token=token)
        card_types += more
    return {
        "exportedAt": now_iso(),
        "agents": agents_out,
        "workspaces": workspaces_out,
        "facts": [f.public() for f in deps.memories.list_facts(t)],
        "runs": runs_out,
        "usage": [{k: v for k, v in row.items() if not k.startswith(("PK", "SK", "GSI"))} for row in usage],
        "cardTypes": [c.public() for c in card_types],
    }


def delete_everything(deps: Deps, t: str) -> dict[str, int]:
    """Removes every row and object of the caller: agents (sessions, transcripts, memories, runs),
    workspaces and their memory, facts and usage rows."""
    counts = {"agents": 0, "workspaces": 0, "facts": 0, "usageRows": 0, "transcripts": 0}
    for agent in _all_agents(deps, t):
        if agent.schedule:
            deps.schedules.delete(agent.id)
        counts["transcripts"] += deps.history.delete_agent(t, agent.id)
        deps.table.delete_agent_cascade(t, agent.id)
        counts["agents"] += 1
    for ws in _all_workspaces(deps, t):
        deps.memories.delete_owner(t, "workspace", ws.id)
        deps.table.delete_workspace(t, ws.id)
        counts["workspaces"] += 1
    counts["facts"] = deps.memories.delete_all_facts(t)
    usage = deps.table._query_all(keys.usage_pk(t), projection="PK, SK")
    deps.table._delete_keys([(u["PK"], u["SK"]) for u in usage])
    counts["usageRows"] = len(usage)
    # Anything left in the tenant partition: custom card types, runs whose agent row was already gone.
    rest = deps.table._query_all(keys.tenant_pk(t), projection="PK, SK")
    deps.table._delete_keys([(r["PK"], r["SK"]) for r in rest])
    return counts
