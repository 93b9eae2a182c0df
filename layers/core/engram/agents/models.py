"""Agents and workspaces: request bodies and public resources."""

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body, Id, Resource
from engram.usage.models import AgentLimits, Limits

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
ToolNameIn = Annotated[str, StringConstraints(min_length=1, max_length=128)]
# TL10: the seconds an approval may wait before it counts as denied (a minute to a week).
ApprovalTimeout = Annotated[int, Field(ge=60, le=7 * 86400)]
APPROVAL_TIMEOUT_S = 86400


def _own_tool_names(names: list[str]) -> list[str]:
    """An agent's `requireApproval` names Engram's own tools (memory_store, remember, ...); the
    Anthropic server tools run inside Anthropic's API call, where no call can be held for a person."""
    for name in names:
        if name in ("web_search", "web_fetch"):
            raise ValueError(
                f"{name} is an Anthropic server tool: it runs inside the model's API call and cannot be held for "
                "approval; leave it out of serverTools instead"
            )
    return names


OwnToolNames = Annotated[list[ToolNameIn], Field(max_length=50), AfterValidator(_own_tool_names)]


class ToolGrant(Body):
    """An MCP connection an agent may use (TL1), and optionally which of its tools (by the
    server's tool names); without `allow`, every tool the server lists."""

    connection_id: Id
    allow: Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=128)]], Field(max_length=100)] | None = None
    # TL10: true (every tool of the connection) or the server's tool names that need the owner's
    # approval before each call; none by default.
    require_approval: bool | Annotated[list[ToolNameIn], Field(max_length=100)] | None = None


ToolGrants = Annotated[list[ToolGrant], Field(max_length=10)]


class AgentTool(BaseModel):
    """A stored tool grant (ToolGrant as the agent record holds it)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    connection_id: str
    allow: list[str] | None = None
    require_approval: bool | list[str] | None = None


# Anthropic's server tools (TL6): run by the Anthropic API itself, not by Engram.
ServerTool = Literal["web_search", "web_fetch"]


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
    tools: ToolGrants = []
    server_tools: Annotated[list[ServerTool], Field(max_length=2)] = []
    # OB2: the run timelines of this agent keep tool inputs and results (never by default).
    trace_content: bool = False
    limits: AgentLimits | None = None  # spending limits (TL10)
    require_approval: OwnToolNames = []  # TL10: Engram's own tools that need the owner's approval
    approval_timeout_s: ApprovalTimeout = APPROVAL_TIMEOUT_S


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
    tools: ToolGrants | None = None
    server_tools: Annotated[list[ServerTool], Field(max_length=2)] | None = None
    trace_content: bool | None = None
    limits: AgentLimits | None = None  # replaces the agent's limits; null removes them
    require_approval: OwnToolNames | None = None
    approval_timeout_s: ApprovalTimeout | None = None


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
    tools: list[AgentTool] = []
    server_tools: list[str] = []
    trace_content: bool = False
    limits: Limits | None = None
    require_approval: list[str] = []
    approval_timeout_s: int = APPROVAL_TIMEOUT_S
