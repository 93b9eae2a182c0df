"""Run records: what one execution (chat turn, heartbeat, manual run, re-examination, council member) did."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body, Resource, now_iso
from engram.usage.models import Usage

RunKind = Literal["chat", "heartbeat", "manual", "reexamination", "council_member"]
# awaiting_approval (TL10): the turn stopped before a tool call its owner must approve.
RunStatus = Literal["queued", "running", "succeeded", "failed", "awaiting_approval"]
APPROVAL_EXPIRED = "expired"  # who decided an approval request nobody decided in time (it is denied)


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
    usage: Usage = Field(default_factory=Usage)  # a factory: no Usage validator built at import
    error: dict[str, Any] | None = None
    resolution_status: str | None = None
    latest_conviction: int | None = None
    model: str | None = None
    tool_calls: list[dict[str, Any]] = []
    # When the run's turn began and when it ended: set once, so acting on the run later (resolving
    # its card, a re-examination finishing) moves `updatedAt` but never its duration.
    started_at: str | None = None
    finished_at: str | None = None
    # TL10: the tool calls held for the owner's approval ({toolUseId, name, input, requestedAt,
    # expiresAt} and, once decided, decision, decidedBy, decidedAt, note), and the paused turn
    # itself (engine.approval.PausedTurn as stored; never public).
    pending_approvals: list[dict[str, Any]] = []
    paused: dict[str, Any] | None = Field(default=None, exclude=True)  # written by RunRepository.item

    def unqueued(self) -> "Run":
        """This queued run as failed because its job could not be sent (it would never start)."""
        error = {"code": "queue_unavailable", "message": "the run could not be queued; nothing ran, start it again"}
        at = now_iso()
        return self.model_copy(update={"status": "failed", "updated_at": at, "finished_at": at, "error": error})


RESUME_GRACE_S = 120  # TL10: a decided run not resumed by then has its resume job sent again


def approvals_stale_at(pending: Sequence[Mapping[str, object]], *, now: int) -> int:
    """When the sweeper looks at a run waiting for approvals (TL10): its first undecided request's
    expiry, or, when every one is decided, a short grace for its resume job to be taken."""
    waiting = [epoch_of(str(p["expiresAt"])) for p in pending if "decision" not in p and p.get("expiresAt")]
    return min(waiting) if waiting else now + RESUME_GRACE_S


def epoch_of(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


class RunJob(BaseModel):
    """An API-started run (manual, re-examination) as the run queue carries it: written by
    `runs.service` (and sent again by `runs.execution` when the shared session was busy), read by
    `runs.execution.process_run_job`."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    tenant: str
    run_id: str
    agent_id: str | None = None
    kind: RunKind | None = None
    inputs: dict[str, Any] | None = None
    attempt: int | None = None  # the sends so far when the shared session was busy (none: the first)
    resume: bool | None = None  # TL10: the run's approvals are decided; its paused turn goes on

    def body(self) -> dict[str, object]:
        """The queue message's body (camelCase, absent fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)


class RunCreate(Body):
    """POST /api/agents/{agentId}/runs: run the agent now (a manual run)."""

    prompt: Annotated[str, StringConstraints(min_length=1, max_length=32_000)] | None = None
    inputs: Annotated[dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,100}$")], Any], Field(max_length=50)] = {}

    @field_validator("inputs")
    @classmethod
    def _storable(cls, inputs: dict[str, Any]) -> dict[str, Any]:
        for name, value in inputs.items():
            problem = _unstorable(value, depth=1)
            if problem:
                raise ValueError(f"inputs.{name}: {problem}")
        return inputs


MAX_INPUT_DEPTH = 8


def _unstorable(value: object, *, depth: int) -> str | None:
    """Why a JSON value cannot be stored as run memory (None when it can): object keys must be
    1-100 characters, nesting at most MAX_INPUT_DEPTH levels."""
    if depth > MAX_INPUT_DEPTH:
        return f"nested deeper than {MAX_INPUT_DEPTH} levels"
    if isinstance(value, dict):
        for key, inner in value.items():
            if not 1 <= len(key) <= 100:
                return "object keys must be 1 to 100 characters"
            if problem := _unstorable(inner, depth=depth + 1):
                return problem
    elif isinstance(value, list):
        for inner in value:
            if problem := _unstorable(inner, depth=depth + 1):
                return problem
    return None


class RunUpdate(Body):
    """PATCH /api/runs/{runId}: the user's verdict on a decision's lifetime."""

    resolution_status: Literal["open", "resolved", "expired"]


class ActiveMemoryStatus(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    agent_id: str
    enabled: bool
    status: Literal["fresh", "carrying_context"]
    runs_since_reset: int
    session_age_seconds: int | None
    last_reset_at: str | None
    # When the shared session began carrying its context (its first turn or run since the last
    # reset; null while fresh), and when a turn or run last added to it.
    context_started_at: str | None = None
    last_active_at: str | None = None
    last_active_seconds: int | None = None
    session_revision: int
    warning: str | None = None

    def public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, mode="json")
