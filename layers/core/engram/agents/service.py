"""Use cases of agents and workspaces: create, read, change, delete (with everything derived)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from engram.agents.models import Agent, AgentCreate, AgentUpdate, ToolGrant, Workspace, WorkspaceCreate, WorkspaceUpdate
from engram.cards.service import require_card_type
from engram.kernel.errors import BadRequest, Conflict, NotFound
from engram.kernel.ids import DASHBOARD, check_id, new_id
from engram.kernel.model import changes_of, now_iso, page

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from engram.agents.ports import Agents, AgentSchedules, AgentStores, GrantedConnections, OwnedMemories, Workspaces
    from engram.kernel.settings import Settings

# Fields a PATCH may clear with null; the others must keep a value.
_NULLABLE_AGENT_FIELDS = {"workspaceId", "schedule", "cardType", "model", "limits"}


def create_workspace(workspaces: Workspaces, tenant: str, body: WorkspaceCreate) -> Workspace:
    now = now_iso()
    ws = Workspace(id=new_id("ws"), created_at=now, updated_at=now, **body.model_dump())
    workspaces.put(tenant, ws)
    return ws


def get_workspace(workspaces: Workspaces, tenant: str, workspace_id: str) -> Workspace:
    ws = workspaces.get(tenant, workspace_id)
    if ws is None:
        raise NotFound("workspace not found", field="workspaceId")
    return ws


def list_workspaces(workspaces: Workspaces, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    return page(*workspaces.page(tenant, limit=limit, token=token))


def update_workspace(workspaces: Workspaces, tenant: str, workspace_id: str, body: WorkspaceUpdate) -> Workspace:
    changes = changes_of(body, nullable=set())
    changes["updatedAt"] = now_iso()
    return workspaces.update(tenant, check_id("workspaceId", workspace_id), changes)


def delete_workspace(workspaces: Workspaces, agents: Agents, memories: OwnedMemories, tenant: str, workspace_id: str) -> None:
    get_workspace(workspaces, tenant, workspace_id)
    members = agents.in_workspace(tenant, workspace_id)
    if members:
        shown = [agents.get(tenant, member) for member in members[:5]]
        names = ", ".join(f"“{a.name}”" if a is not None else member for a, member in zip(shown, members[:5], strict=True))
        more = f" and {len(members) - 5} more" if len(members) > 5 else ""
        count = "1 agent" if len(members) == 1 else f"{len(members)} agents"
        raise Conflict(
            f"the workspace is still used by {count} ({names}{more}): move them to another workspace or delete them first",
            field="workspaceId",
            code="workspace_in_use",
        )
    memories.delete_owner(tenant, "workspace", workspace_id)
    workspaces.delete(tenant, workspace_id)


def _check_schedule(schedule: str | None, default_prompt: str | None) -> None:
    if schedule and not (default_prompt or "").strip():
        raise BadRequest(
            "a scheduled agent needs a defaultPrompt: it is what every heartbeat runs",
            field="defaultPrompt",
            code="missing_default_prompt",
        )


def _check_team(agents: Agents, executor: Executor, tenant: str, agent_id: str | None, team: list[str]) -> None:
    """A lead's specialists are the caller's own agents, named once, and not the lead itself."""
    if len(set(team)) != len(team):
        raise BadRequest("team names an agent twice", field="team")
    if agent_id in team:
        raise BadRequest("an agent cannot be on its own team", field="team")
    futures = [executor.submit(agents.get, tenant, member) for member in team]
    for member, future in zip(team, futures, strict=False):
        if future.result() is None:
            raise NotFound(f"team member {member} not found", field="team", code="team_member_not_found")


def _check_tools(
    connections: GrantedConnections,
    settings: Settings,
    tenant: str,
    grants: list[ToolGrant] | None,
    server_tools: Sequence[str] | None,
) -> None:
    """`tools` name the caller's own connections, each once (TL1); `serverTools` need the Anthropic API (TL6)."""
    if grants:
        ids = [grant.connection_id for grant in grants]
        if len(set(ids)) != len(ids):
            raise BadRequest("tools names a connection twice", field="tools")
        found = connections.get_many_with_secrets(tenant, ids)
        for connection_id in ids:
            if connection_id not in found:
                raise NotFound(f"connection {connection_id} not found", field="tools", code="connection_not_found")
    if server_tools and settings.model_provider == "bedrock":
        raise BadRequest(
            "serverTools (web_search, web_fetch) are run by the Anthropic API; this stack uses Amazon Bedrock, which does not offer them",
            field="serverTools",
            code="server_tools_unsupported",
        )


def create_agent(deps: AgentStores, tenant: str, body: AgentCreate) -> dict[str, object]:
    require_card_type(deps.card_types, tenant, body.card_type)
    _check_schedule(body.schedule, body.default_prompt)
    if body.team:  # the pool is made only for a team to look up
        _check_team(deps.agents, deps.executor, tenant, None, body.team)
    _check_tools(deps.connections, deps.settings, tenant, body.tools, body.server_tools)
    now = now_iso()
    fields = body.model_dump()
    fields["model"] = fields["model"] or deps.settings.chat_model
    agent = Agent(id=new_id("ag"), created_at=now, updated_at=now, **fields)
    secret = secrets.token_urlsafe(32)
    if agent.schedule:
        deps.schedules.put(tenant, agent.id, agent.schedule)  # first: an invalid expression stores nothing
    try:
        deps.agents.create(
            tenant,
            agent,
            webhook_secret=secret,
            with_items=[deps.sessions.dashboard_item(tenant, agent.id, now)],
            max_agents=deps.settings.max_agents,
            max_scheduled=deps.settings.max_scheduled_agents,
        )
    except Exception:
        if agent.schedule:
            deps.schedules.delete(agent.id)
        raise
    # The webhook secret is shown once, here; it is never returned again.
    return {**agent.public(), "webhookSecret": secret}


def rotate_webhook_secret(agents: Agents, settings: Settings, tenant: str, agent_id: str) -> dict[str, object]:
    """A new webhook secret, shown once (here); the replaced one keeps working for
    WEBHOOK_SECRET_GRACE_SECONDS so senders can switch over without a failed delivery."""
    check_id("agentId", agent_id)
    secret = secrets.token_urlsafe(32)
    grace = settings.webhook_secret_grace_s
    until = int(time.time()) + grace if grace else 0
    agents.rotate_webhook_secret(tenant, agent_id, secret, previous_until=until)
    return {
        "agentId": agent_id,
        "webhookSecret": secret,
        "previousSecretValidUntil": datetime.fromtimestamp(until, UTC).isoformat().replace("+00:00", "Z") if until else None,
    }


def get_agent(agents: Agents, tenant: str, agent_id: str) -> Agent:
    agent = agents.get(tenant, agent_id)
    if agent is None:
        raise NotFound("agent not found", field="agentId")
    return agent


def list_agents(agents: Agents, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    return page(*agents.page(tenant, limit=limit, token=token))


def update_agent(deps: AgentStores, tenant: str, agent_id: str, body: AgentUpdate) -> Agent:
    """Changing, adding or clearing `schedule` updates, creates or deletes the agent's schedule;
    turning activeMemory on is a reset (AM2): the shared session starts fresh."""
    changes = changes_of(body, nullable=_NULLABLE_AGENT_FIELDS)
    require_card_type(deps.card_types, tenant, changes.get("cardType"))
    before = get_agent(deps.agents, tenant, check_id("agentId", agent_id))
    _check_schedule(changes.get("schedule", before.schedule), changes.get("defaultPrompt", before.default_prompt))
    if changes.get("team"):
        _check_team(deps.agents, deps.executor, tenant, agent_id, changes["team"])
    _check_tools(deps.connections, deps.settings, tenant, body.tools if "tools" in changes else None, changes.get("serverTools"))
    if "model" in changes and changes["model"] is None:
        changes["model"] = deps.settings.chat_model  # null means "back to the default model"
    changes["updatedAt"] = now_iso()
    if changes.get("activeMemory") is True and not before.active_memory:
        # Enabling Active Memory is a reset; done first, so a busy session changes nothing.
        deps.sessions.reset_context(tenant, agent_id, DASHBOARD, wait_s=deps.settings.session_wait_s)
    schedule_changed = "schedule" in changes and changes["schedule"] != before.schedule
    if schedule_changed:
        _sync_schedule(deps.schedules, tenant, agent_id, changes["schedule"])
    try:
        scheduling = int(bool(changes.get("schedule", before.schedule))) - int(bool(before.schedule))
        agent = deps.agents.update(
            tenant, agent_id, changes, scheduling=scheduling, max_scheduled=deps.settings.max_scheduled_agents
        )
    except Exception:
        if schedule_changed:  # put the schedule back as it was: nothing half-written
            _sync_schedule(deps.schedules, tenant, agent_id, before.schedule)
        raise
    return agent


def _sync_schedule(schedules: AgentSchedules, tenant: str, agent_id: str, schedule: str | None) -> None:
    if schedule:
        schedules.put(tenant, agent_id, schedule)
    else:
        schedules.delete(agent_id)


def delete_agent(deps: AgentStores, tenant: str, agent_id: str) -> dict[str, object]:
    """Removes the agent and everything derived from it: sessions, transcripts and runs."""
    agent = get_agent(deps.agents, tenant, agent_id)
    if agent.schedule:
        deps.schedules.delete(agent_id)  # first, so no heartbeat fires into a half-deleted agent
    objects = deps.history.delete_agent(tenant, agent_id)
    sessions = deps.agents.delete_cascade(tenant, agent_id)
    return {"id": agent_id, "deleted": True, "sessionsDeleted": len(sessions), "transcriptsDeleted": objects}
