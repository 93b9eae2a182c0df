"""Use cases of run records: read, list, the decision's lifetime, re-examination history, run memory, decisions."""

from __future__ import annotations

from typing import Any

from engram.agents.service import get_agent
from engram.deps import Deps
from engram.kernel.errors import Conflict, NotFound
from engram.kernel.ids import check_id
from engram.kernel.model import page
from engram.runs.models import Run, RunUpdate


def get_run(deps: Deps, t: str, run_id: str) -> Run:
    run = deps.runs.get(t, run_id)
    if run is None:
        raise NotFound("run not found", field="runId")
    return run


def list_runs(deps: Deps, t: str, agent_id: str, limit: int, token: str | None) -> dict[str, Any]:
    get_agent(deps, t, agent_id)
    return page(*deps.runs.list(t, agent_id, limit=limit, token=token))


def update_run(deps: Deps, t: str, run_id: str, body: RunUpdate) -> Run:
    """PATCH /api/runs/{runId}: the decision's lifetime (open, resolved, expired); the result itself
    never changes."""
    run = get_run(deps, t, check_id("runId", run_id))
    if not (isinstance(run.result, dict) and isinstance(run.result.get("card"), dict)):
        raise Conflict("only a run with a result card has a resolution status", field="runId", code="no_card")
    return deps.runs.set_resolution(t, run_id, body.resolution_status)


def list_reexaminations(deps: Deps, t: str, run_id: str, limit: int, token: str | None) -> dict[str, Any]:
    """GET /api/runs/{runId}/re-examinations: the parent's conviction history, oldest first."""
    get_run(deps, t, check_id("runId", run_id))
    return page(*deps.runs.list_reexaminations(t, run_id, limit=limit, token=token))


def run_memory(deps: Deps, t: str, run_id: str) -> dict[str, Any]:
    """GET /api/runs/{runId}/memory: the run's scratch store as it was left (RM1, persisted)."""
    from engram.run_memory.store import run_memory_listing

    run = get_run(deps, t, check_id("runId", run_id))
    owner = run.agent_id
    if run.kind == "council_member" and run.council_run_id:
        lead_run = deps.runs.get(t, run.council_run_id)
        owner = lead_run.agent_id if lead_run else owner
        run_id = run.council_run_id  # a member worked in its lead's run memory
    return {"runId": run_id, "items": run_memory_listing(deps, t, owner, run_id)}


