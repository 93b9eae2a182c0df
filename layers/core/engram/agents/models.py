"""Agents and workspaces: request bodies and public resources."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from engram.kernel.model import Body, Id, Resource

ModelName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,100}$")]
# EventBridge Scheduler expressions (an agent's heartbeat).
Schedule = Annotated[str, StringConstraints(pattern=r"^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\([^()]{9,200}\))$")]


class WorkspaceCreate(Body):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    description: Annotated[str, StringConstraints(max_length=2000)] = ""


class WorkspaceUpdate(Body):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = None
    description: Annotated[str, StringConstraints(max_length=2000)] | None = None


class Workspace(Resource):
    name: str
    description: str = ""


# --- agents ---------------------------------------------------------------------------------
class AgentFields(Body):
    persona: Annotated[str, StringConstraints(max_length=8000)] = ""
    model: ModelName | None = None
    workspace_id: Id | None = None
    agent_memory: bool = False
    active_memory: bool = False
    review_decisions: bool = False
    default_prompt: Annotated[str, StringConstraints(max_length=8000)] = ""
    schedule: Schedule | None = None
    card_type: Id | None = None
    team: Annotated[list[Id], Field(max_length=10)] = []


class AgentCreate(AgentFields):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)]


class AgentUpdate(Body):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = None
    persona: Annotated[str, StringConstraints(max_length=8000)] | None = None
    model: ModelName | None = None
    workspace_id: Id | None = None
    agent_memory: bool | None = None
    active_memory: bool | None = None
    review_decisions: bool | None = None
    default_prompt: Annotated[str, StringConstraints(max_length=8000)] | None = None
    schedule: Schedule | None = None
    card_type: Id | None = None
    team: Annotated[list[Id], Field(max_length=10)] | None = None


class Agent(Resource):
    name: str
    persona: str = ""
    model: str
    workspace_id: str | None = None
    agent_memory: bool = False
    active_memory: bool = False
    review_decisions: bool = False
    default_prompt: str = ""
    schedule: str | None = None
    card_type: str | None = None
    team: list[str] = []
