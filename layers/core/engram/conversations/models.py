"""Sessions and the messages that start turns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StringConstraints

from engram.kernel.model import Body, Id, Resource

# Every agent has this session; chat and Active Memory runs share it.
DASHBOARD = "dashboard"


class SessionCreate(Body):
    id: Id | None = None
    title: Annotated[str, StringConstraints(max_length=200)] = ""


class Session(Resource):
    agent_id: str
    title: str = ""
    message_count: int = 0
    revision: int = 0
    # The run whose commit the transcript reflects (see conversations.transcripts); not public.
    last_run_id: str | None = Field(default=None, exclude=True)


class MessageIn(Body):
    message: Annotated[str, StringConstraints(min_length=1)]


class WebhookIn(Body):
    message: Annotated[str, StringConstraints(min_length=1)]
    session_id: Id = "dashboard"

    # The public contract names this webhook field in snake_case (`session_id`).
    model_config = ConfigDict(alias_generator=None, extra="forbid", str_strip_whitespace=True)


@dataclass(frozen=True)
class History:
    """A session's committed transcript as read from S3, with the ETag a conditional write must
    match (the ETag of the object as it is, which may hold a turn that never committed)."""

    messages: list[dict[str, Any]]
    etag: str | None  # None: no object yet
    run_id: str | None = None  # the run whose commit these messages are
