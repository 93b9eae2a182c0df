"""An account export job: written by the heartbeat function, read by the API."""

from typing import Any, Literal

from pydantic import Field

from engram.kernel.model import Resource

ExportStatus = Literal["queued", "running", "succeeded", "failed"]

# The record types of an export file, one JSON object per line, each with its `type`.
RECORD_TYPES = (
    "agent",
    "session",
    "message",
    "memory",
    "runMemory",
    "run",
    "workspace",
    "fact",
    "usage",
    "cardType",
)


class ExportJob(Resource):
    status: ExportStatus = "queued"
    counts: dict[str, int] = {}  # records written so far, per type
    bytes: int = 0  # bytes written so far
    parts: int = 0  # object parts uploaded so far
    finished_at: str | None = None
    error: dict[str, Any] | None = None
    claimed_until: int | None = Field(default=None, exclude=True)  # a worker's claim (epoch seconds)
    expires_at: int = Field(default=0, exclude=True)  # DynamoDB TTL: the row goes with its object
