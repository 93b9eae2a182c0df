"""Use cases behind the CRUD routes: agents, workspaces, sessions, runs and usage."""

from __future__ import annotations

import secrets
from typing import Any

from .cards import recent_decisions, require_card_type
from .deps import Deps
from .errors import BadRequest, Conflict, NotFound
from .ids import check_id, new_id
from .models import (
    Agent,
    AgentCreate,
    AgentUpdate,
    Run,
    RunUpdate,
    Session,
    SessionCreate,
    Workspace,
    WorkspaceCreate,
    WorkspaceUpdate,
    now_iso,
)

DASHBOARD = "dashboard"
# Fields a PATCH may clear with null; the others must keep a value.
_NULLABLE_AGENT_FIELDS = {"workspaceId", "schedule", "cardType", "model"}


def _changes(body: Any, nullable: set[str]) -> dict[str, Any]:
    changes = body.model_dump(by_alias=True, exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    for name, value in changes.items():
        if value is None and name not in nullable:
            raise BadRequest(f"{name} cannot be null", field=name)
    return changes


def _page(items: list[Any], token: str | None) -> dict[str, Any]:
    return {"items": [i.public() if hasattr(i, "public") else i for i in items], "nextToken": token}


# --- workspaces -----------------------------------------------------------------------------
def create_workspace(deps: Deps, t: str, body: WorkspaceCreate) -> Workspace:
    now = now_iso()
    ws = Workspace(id=new_id("ws"), created_at=now, updated_at=now, **body.model_dump())
    deps.table.put_workspace(t, ws)
    return ws


def get_workspace(deps: Deps, t: str, workspace_id: str) -> Workspace:
    ws = deps.table.get_workspace(t, workspace_id)
    if ws is None:
        raise NotFound("workspace not found", field="workspaceId")
    return ws


def list_workspaces(deps: Deps, t: str, limit: int, token: str | None) -> dict[str, Any]:
    return _page(*deps.table.list_workspaces(t, limit=limit, token=token))


def update_workspace(deps: Deps, t: str, workspace_id: str, body: WorkspaceUpdate) -> Workspace:
    changes = _changes(body, nullable=set())
    changes["updatedAt"] = now_iso()
    return deps.table.update_workspace(t, check_id("workspaceId", workspace_id), changes)


def delete_workspace(deps: Deps, t: str, workspace_id: str) -> None:
    get_workspace(deps, t, workspace_id)
    members = deps.table.agents_in_workspace(t, workspace_id)
    if members:
        raise Conflict(
            f"the workspace still has {len(members)} agent(s): move or delete them first ({', '.join(members[:5])})",
            field="workspaceId",
            code="workspace_in_use",
        )
    deps.memories.delete_owner(t, "workspace", workspace_id)
    deps.table.delete_workspace(t, workspace_id)


# --- agents ---------------------------------------------------------------------------------
def _check_schedule(schedule: str | None, default_prompt: str | None) -> None:
    if schedule and not (default_prompt or "").strip():
        raise BadRequest("a scheduled agent needs a defaultPrompt: it is what every heartbeat runs", field="defaultPrompt",
                         code="missing_default_prompt")


def _check_team(deps: Deps, t: str, agent_id: str | None, team: list[str] | None) -> None:
    """A lead's specialists are the caller's own agents, named once, and not the lead itself."""
    if not team:
        return
    if len(set(team)) != len(team):
        raise BadRequest("team names an agent twice", field="team")
    if agent_id in team:
        raise BadRequest("an agent cannot be on its own team", field="team")
    futures = [deps.executor.submit(deps.table.get_agent, t, member) for member in team]
    for member, future in zip(team, futures):
        if future.result() is None:
            raise NotFound(f"team member {member} not found", field="team", code="team_member_not_found")


def create_agent(deps: Deps, t: str, body: AgentCreate) -> dict[str, Any]:
    require_card_type(deps, t, body.card_type)
    _check_schedule(body.schedule, body.default_prompt)
    _check_team(deps, t, None, body.team)
    now = now_iso()
    fields = body.model_dump()
    fields["model"] = fields["model"] or deps.settings.chat_model
    agent = Agent(id=new_id("ag"), created_at=now, updated_at=now, **fields)
    secret = secrets.token_urlsafe(32)
    dashboard = Session(id=DASHBOARD, agent_id=agent.id, created_at=now, updated_at=now, title="Dashboard")
    if agent.schedule:
        deps.schedules.put(t, agent.id, agent.schedule)  # first: an invalid expression stores nothing
    try:
        deps.table.create_agent(t, agent, webhook_secret=secret, dashboard=dashboard)
    except Exception:
        if agent.schedule:
            deps.schedules.delete(agent.id)
        raise
    # The webhook secret is shown once, here; it is never returned again.
    return {**agent.public(), "webhookSecret": secret}


def get_agent(deps: Deps, t: str, agent_id: str) -> Agent:
    agent = deps.table.get_agent(t, agent_id)
    if agent is None:
        raise NotFound("agent not found", field="agentId")
    return agent


def list_agents(deps: Deps, t: str, limit: int, token: str | None) -> dict[str, Any]:
    return _page(*deps.table.list_agents(t, limit=limit, token=token))


def update_agent(deps: Deps, t: str, agent_id: str, body: AgentUpdate) -> Agent:
    """Changing, adding or clearing `schedule` updates, creates or deletes the agent's schedule;
    turning activeMemory on is a reset (AM2): the shared session starts fresh."""
    changes = _changes(body, nullable=_NULLABLE_AGENT_FIELDS)
    require_card_type(deps, t, changes.get("cardType"))
    before = get_agent(deps, t, check_id("agentId", agent_id))
    _check_schedule(changes.get("schedule", before.schedule), changes.get("defaultPrompt", before.default_prompt))
    _check_team(deps, t, agent_id, changes.get("team"))
    if "model" in changes and changes["model"] is None:
        changes["model"] = deps.settings.chat_model  # null means "back to the default model"
    changes["updatedAt"] = now_iso()
    if changes.get("activeMemory") is True and not before.active_memory:
        from .active_memory import reset

        reset(deps, t, agent_id)  # enabling is a reset; done first, so a busy session changes nothing
    schedule_changed = "schedule" in changes and changes["schedule"] != before.schedule
    if schedule_changed:
        _sync_schedule(deps, t, agent_id, changes["schedule"])
    try:
        agent = deps.table.update_agent(t, agent_id, changes)
    except Exception:
        if schedule_changed:  # put the schedule back as it was: nothing half-written
            _sync_schedule(deps, t, agent_id, before.schedule)
        raise
    return agent


def _sync_schedule(deps: Deps, t: str, agent_id: str, schedule: str | None) -> None:
    if schedule:
        deps.schedules.put(t, agent_id, schedule)
    else:
        deps.schedules.delete(agent_id)


def delete_agent(deps: Deps, t: str, agent_id: str) -> dict[str, Any]:
    """Removes the agent and everything derived from it: sessions, transcripts and runs."""
    agent = get_agent(deps, t, agent_id)
    if agent.schedule:
        deps.schedules.delete(agent_id)  # first, so no heartbeat fires into a half-deleted agent
    objects = deps.history.delete_agent(t, agent_id)
    sessions = deps.table.delete_agent_cascade(t, agent_id)
    return {"id": agent_id, "deleted": True, "sessionsDeleted": len(sessions), "transcriptsDeleted": objects}


# --- sessions -------------------------------------------------------------------------------
def _session_public(item: dict[str, Any]) -> dict[str, Any]:
    return Session.model_validate(item).public()


def create_session(deps: Deps, t: str, agent_id: str, body: SessionCreate) -> Session:
    now = now_iso()
    session = Session(id=body.id or new_id("s"), agent_id=check_id("agentId", agent_id), created_at=now, updated_at=now, title=body.title)
    deps.table.create_session(t, session)
    return session


def list_sessions(deps: Deps, t: str, agent_id: str, limit: int, token: str | None) -> dict[str, Any]:
    items, nxt = deps.table.list_sessions(t, agent_id, limit=limit, token=token)
    if not items and not token:
        get_agent(deps, t, agent_id)  # an empty list and an unknown agent are different answers
    return _page(items, nxt)


def get_session(deps: Deps, t: str, agent_id: str, session_id: str) -> dict[str, Any]:
    item = deps.table.get_session(t, agent_id, session_id)
    if item is None:
        if deps.table.get_agent(t, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    history = deps.history.load(t, agent_id, session_id)
    return {**_session_public(item), "messages": history.messages}


def delete_session(deps: Deps, t: str, agent_id: str, session_id: str) -> dict[str, Any]:
    """Deletes the history (never long-term memory). `dashboard` always exists: it is emptied."""
    item = deps.table.get_session(t, agent_id, session_id)
    if item is None:
        if deps.table.get_agent(t, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    deps.table.delete_session(t, agent_id, session_id)  # refused while a turn holds it
    deps.history.delete(t, agent_id, session_id)
    from .memory.recall import delete_session_archive  # the search index stays off the import path

    delete_session_archive(deps, t, agent_id, session_id)  # before dashboard is re-created
    deps.memories.delete_session_memories(t, agent_id, session_id)
    if session_id == DASHBOARD:
        now = now_iso()
        deps.table.create_session(
            t, Session(id=DASHBOARD, agent_id=agent_id, created_at=now, updated_at=now, title="Dashboard"), if_absent_ok=True
        )
    return {"id": session_id, "deleted": True}


# --- runs and usage -------------------------------------------------------------------------
def get_run(deps: Deps, t: str, run_id: str) -> Run:
    run = deps.table.get_run(t, run_id)
    if run is None:
        raise NotFound("run not found", field="runId")
    return run


def list_runs(deps: Deps, t: str, agent_id: str, limit: int, token: str | None) -> dict[str, Any]:
    get_agent(deps, t, agent_id)
    return _page(*deps.table.list_runs(t, agent_id, limit=limit, token=token))


def update_run(deps: Deps, t: str, run_id: str, body: RunUpdate) -> Run:
    """PATCH /api/runs/{runId}: the decision's lifetime (open, resolved, expired); the result itself
    never changes."""
    run = get_run(deps, t, check_id("runId", run_id))
    if not (isinstance(run.result, dict) and isinstance(run.result.get("card"), dict)):
        raise Conflict("only a run with a result card has a resolution status", field="runId", code="no_card")
    return deps.table.set_resolution(t, run_id, body.resolution_status)


def list_reexaminations(deps: Deps, t: str, run_id: str, limit: int, token: str | None) -> dict[str, Any]:
    """GET /api/runs/{runId}/re-examinations: the parent's conviction history, oldest first."""
    get_run(deps, t, check_id("runId", run_id))
    return _page(*deps.table.list_reexaminations(t, run_id, limit=limit, token=token))


def run_memory(deps: Deps, t: str, run_id: str) -> dict[str, Any]:
    """GET /api/runs/{runId}/memory: the run's scratch store as it was left (RM1, persisted)."""
    from .run_memory import run_memory_listing

    run = get_run(deps, t, check_id("runId", run_id))
    owner = run.agent_id
    if run.kind == "council_member" and run.council_run_id:
        lead_run = deps.table.get_run(t, run.council_run_id)
        owner = lead_run.agent_id if lead_run else owner
        run_id = run.council_run_id  # a member worked in its lead's run memory
    return {"runId": run_id, "items": run_memory_listing(deps, t, owner, run_id)}


def list_decisions(deps: Deps, t: str, agent_id: str, limit: int) -> dict[str, Any]:
    """The agent's last result cards, newest first, as get_my_decisions shows them (plus the cards)."""
    get_agent(deps, t, agent_id)
    return _page(recent_decisions(deps, t, agent_id, limit=limit), None)


def list_usage(deps: Deps, t: str, agent_id: str | None, session_id: str | None, limit: int, token: str | None) -> dict[str, Any]:
    if session_id and not agent_id:
        raise BadRequest("sessionId filters need agentId (session ids are per agent)", field="agentId", code="missing_filter")
    if agent_id:
        check_id("agentId", agent_id)
    rows, nxt = deps.table.list_usage(t, agent_id=agent_id, session_key=session_id, limit=limit, token=token)
    totals = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0}
    for row in rows:
        data = row.public()
        for k in totals:
            totals[k] += data[k]
    totals["costUsd"] = round(totals["costUsd"], 8)
    return {**_page(rows, nxt), "totals": totals}
