"""Pydantic models: request bodies (strict, unknown fields rejected) and public resources (camelCase)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from .ids import ID_PATTERN

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
ModelName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,100}$")]
# EventBridge Scheduler expressions; the heartbeat that fires them is a later feature.
Schedule = Annotated[str, StringConstraints(pattern=r"^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\([^()]{9,200}\))$")]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Body(BaseModel):
    """Request bodies: camelCase on the wire, unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_alias=True, validate_by_name=False, extra="forbid", str_strip_whitespace=True)


class Resource(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    id: str
    created_at: str
    updated_at: str

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


# --- workspaces -----------------------------------------------------------------------------
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


# --- sessions -------------------------------------------------------------------------------
class SessionCreate(Body):
    id: Id | None = None
    title: Annotated[str, StringConstraints(max_length=200)] = ""


class Session(Resource):
    agent_id: str
    title: str = ""
    message_count: int = 0
    revision: int = 0


class MessageIn(Body):
    message: Annotated[str, StringConstraints(min_length=1)]


class WebhookIn(Body):
    message: Annotated[str, StringConstraints(min_length=1)]
    session_id: Id = "dashboard"

    # DESIGN §5 names this webhook field in snake_case.
    model_config = ConfigDict(alias_generator=None, extra="forbid", str_strip_whitespace=True)


# --- runs and usage -------------------------------------------------------------------------
RunKind = Literal["chat", "heartbeat", "manual", "reexamination", "council_member"]
RunStatus = Literal["queued", "running", "succeeded", "failed"]


class Usage(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
        )


class Run(Resource):
    agent_id: str
    kind: RunKind = "chat"
    trigger: str = "api"
    status: RunStatus = "queued"
    prompt: str = ""
    session_id: str | None = None
    session_revision_before: int | None = None
    session_revision_after: int | None = None
    parent_run_id: str | None = None
    council_run_id: str | None = None  # a council member: the lead's run it worked for
    result: Any = None
    usage: Usage = Usage()
    error: dict[str, Any] | None = None
    resolution_status: str | None = None
    latest_conviction: int | None = None
    model: str | None = None
    tool_calls: list[dict[str, Any]] = []


class RunCreate(Body):
    """POST /api/agents/{agentId}/runs: run the agent now (a manual run)."""

    prompt: Annotated[str, StringConstraints(min_length=1, max_length=32_000)] | None = None
    inputs: Annotated[dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,100}$")], Any], Field(max_length=50)] = {}


class RunUpdate(Body):
    """PATCH /api/runs/{runId}: the user's verdict on a decision's lifetime."""

    resolution_status: Literal["open", "resolved", "expired"]


class ActiveMemoryStatus(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    agent_id: str
    enabled: bool
    status: Literal["fresh", "carrying_context"]
    runs_since_reset: int
    session_age_seconds: int | None
    last_reset_at: str | None
    session_revision: int
    warning: str | None = None

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


class UsageRow(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    created_at: str
    agent_id: str
    session_key: str
    run_id: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


# --- long-term memory and user facts ----------------------------------------------------------
MemoryScope = Literal["agent", "workspace", "user"]
MemorySource = Literal["manual", "auto", "director", "chat", "profile"]
MemoryCategory = Literal["core", "daily", "conversation"]
Confidence = Literal["asserted", "inferred"]
ArchivedReason = Literal["user_deleted", "user_corrected", "agent_forget", "superseded"]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=40)]


class MemoryCreate(Body):
    """POST upserts by key. Lengths are checked against Settings (one place for the limits)."""

    key: str
    value: str
    source: Literal["manual"] = "manual"
    pinned: bool = False
    importance: Annotated[int, Field(ge=0, le=100)] = 0
    category: MemoryCategory = "core"
    confidence: Confidence = "asserted"
    topic: Topic | None = None


class MemoryUpdate(Body):
    value: str | None = None
    pinned: bool | None = None
    importance: Annotated[int, Field(ge=0, le=100)] | None = None
    category: MemoryCategory | None = None
    confidence: Confidence | None = None
    topic: Topic | None = None


class PinBody(Body):
    pinned: bool


class Memory(Resource):
    key: str
    value: str
    scope: MemoryScope
    source: MemorySource = "manual"
    category: MemoryCategory = "core"
    pinned: bool = False
    importance: int = 0
    confidence: Confidence = "asserted"
    topic: str | None = None
    last_referenced_at: str | None = None
    archived_at: str | None = None
    archived_reason: str | None = None
    session_id: str | None = None  # conversation-category rows belong to one session
    expires_at: int | None = None  # daily rows: epoch seconds, DynamoDB TTL
    origin: dict[str, Any] | None = None  # the run/session that wrote it
    superseded_by: str | None = None  # archived as `superseded`: the id of the row that replaced it


class FactCreate(Body):
    fact: str
    topic: Topic | None = None
    confidence: Confidence = "asserted"


class FactUpdate(Body):
    fact: str | None = None
    topic: Topic | None = None
    confidence: Confidence | None = None
    archived: bool | None = None
    archived_reason: Literal["user_deleted", "user_corrected"] | None = None


class Fact(Resource):
    fact: str
    source: Literal["chat", "profile", "inferred"] = "chat"
    confidence: Confidence = "inferred"
    topic: str | None = None
    last_referenced_at: str | None = None
    archived_at: str | None = None
    archived_reason: str | None = None
    origin: dict[str, Any] | None = None


# --- card types and decision cards ------------------------------------------------------------
FieldName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
ActionWord = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,29}$")]
ReExaminable = Literal[False, True, "until_resolved"]  # one Literal, so an error names just the field
CardFieldType = Literal["string", "number", "integer", "boolean", "enum"]


class CardField(Body):
    """One field of a card type (the small schema language cards are validated with)."""

    type: CardFieldType
    required: bool = False
    enum: Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=40)]], Field(min_length=1, max_length=30)] | None = None
    min: float | None = None
    max: float | None = None
    max_length: Annotated[int, Field(ge=1, le=2000)] | None = None
    description: Annotated[str, StringConstraints(max_length=500)] = ""


class CardTypeBody(Body):
    """PUT /api/card-types/{name}: creates or replaces a custom card type of the caller."""

    description: Annotated[str, StringConstraints(max_length=1000)] = ""
    fields: Annotated[dict[FieldName, CardField], Field(min_length=1, max_length=30)]
    re_examinable: ReExaminable = False
    re_examine_actions: Annotated[list[ActionWord], Field(max_length=20)] = []
    summary_fields: Annotated[list[FieldName], Field(max_length=5)] = []


class CardType(Resource):
    """A named result schema; `id` is its name. Built-ins are the same for every user."""

    name: str
    description: str = ""
    fields: dict[str, dict[str, Any]]
    re_examinable: ReExaminable = False
    re_examine_actions: list[str] = []
    summary_fields: list[str] = []
    built_in: bool = False


class Decision(BaseModel):
    """A compact entry of an agent's past result card (GET /api/agents/{agentId}/decisions)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    run_id: str
    created_at: str
    card_type: str | None = None
    action: str
    summary: str
    entry: str
    card: dict[str, Any]

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")
