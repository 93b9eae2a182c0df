"""TL10: a decision on a tool call held for its owner's approval, and the job that resumes the turn."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body

ToolUseId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,100}$")]


class ApprovalIn(Body):
    """POST /api/runs/{runId}/approvals."""

    tool_use_id: ToolUseId
    decision: Literal["approve", "deny"]
    note: Annotated[str, StringConstraints(max_length=2000)] | None = None


class ResumeJob(BaseModel):
    """A decided run's resumption as the turn queue (chat turns) or the run queue (runs) carries it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    kind: Literal["resume"] = "resume"
    tenant: str
    run_id: str

    def body(self) -> dict[str, object]:
        return self.model_dump(by_alias=True)


def is_resume_job(body: object) -> bool:
    return isinstance(body, dict) and body.get("kind") == "resume"
