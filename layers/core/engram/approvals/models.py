"""TL10: a decision on a tool call held for its owner's approval, and the job that resumes the turn."""

from typing import Annotated, Literal

from pydantic import StringConstraints

from engram.kernel.model import Body
from engram.runs.models import ResumeJob

__all__ = ["ApprovalIn", "ResumeJob", "is_resume_job"]

ToolUseId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,100}$")]


class ApprovalIn(Body):
    """POST /api/runs/{runId}/approvals."""

    tool_use_id: ToolUseId
    decision: Literal["approve", "deny"]
    note: Annotated[str, StringConstraints(max_length=2000)] | None = None


def is_resume_job(body: object) -> bool:
    return isinstance(body, dict) and body.get("kind") == "resume"
