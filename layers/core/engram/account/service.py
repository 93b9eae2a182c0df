"""The caller's whole account: export everything stored about them, or delete all of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engram.kernel.model import now_iso
from engram.wiring.stores import Stores


def _every_page(fetch: Callable[..., tuple[list[Any], str | None]]) -> list[Any]:
    items, token = fetch(limit=100, token=None)
    while token:
        more, token = fetch(limit=100, token=token)
        items += more
    return items


def _all_agents(deps: Stores, t: str) -> list[Any]:
    return _every_page(lambda **page: deps.agents.page(t, **page))


def _all_workspaces(deps: Stores, t: str) -> list[Any]:
    return _every_page(lambda **page: deps.workspaces.page(t, **page))


def export(deps: Stores, t: str) -> dict[str, Any]:
    """Everything stored for the caller, as JSON (webhook secrets excluded)."""
    agents_out = []
    runs_out: list[dict[str, Any]] = []
    for agent in _all_agents(deps, t):
        sessions = _every_page(lambda agent_id=agent.id, **page: deps.sessions.page(t, agent_id, **page))
        runs = _every_page(lambda agent_id=agent.id, **page: deps.runs.page(t, agent_id, **page))
        runs_out += [r.public() for r in runs]
        agents_out.append(
            {
                **agent.public(),
                "sessions": [
                    {**s.public(), "messages": deps.history.load(t, agent.id, s.id, committed_run=s.last_run_id).messages}
                    for s in sessions
                ],
                "memories": [m.public() for m in deps.memories.all(t, "agent", agent.id)],
                "runMemory": [
                    {"runId": run_id, **entry.public()} for run_id, entry in deps.run_memory.agent_entries(t, agent.id)
                ],
            }
        )
    workspaces_out = [
        {**ws.public(), "memories": [m.public() for m in deps.memories.all(t, "workspace", ws.id)]}
        for ws in _all_workspaces(deps, t)
    ]
    return {
        "exportedAt": now_iso(),
        "agents": agents_out,
        "workspaces": workspaces_out,
        "facts": [f.public() for f in deps.facts.all(t)],
        "runs": runs_out,
        "usage": deps.usage.all_rows(t),
        "cardTypes": [c.public() for c in deps.card_types.all(t)],
    }


def delete_everything(deps: Stores, t: str) -> dict[str, int]:
    """Removes every row and object of the caller: agents (sessions, transcripts, memories, runs),
    workspaces and their memory, facts and usage rows."""
    counts = {"agents": 0, "workspaces": 0, "facts": 0, "usageRows": 0, "transcripts": 0}
    for agent in _all_agents(deps, t):
        if agent.schedule:
            deps.schedules.delete(agent.id)
        counts["transcripts"] += deps.history.delete_agent(t, agent.id)
        deps.agents.delete_cascade(t, agent.id)
        counts["agents"] += 1
    for ws in _all_workspaces(deps, t):
        deps.memories.delete_owner(t, "workspace", ws.id)
        deps.workspaces.delete(t, ws.id)
        counts["workspaces"] += 1
    counts["facts"] = deps.facts.delete_all(t)
    counts["usageRows"] = deps.usage.delete_all(t)
    # What is left in the tenant partition: custom card types, runs whose agent row was already gone.
    deps.card_types.delete_all(t)
    deps.runs.delete_all(t)
    deps.agents.forget_quotas(t)
    return counts
