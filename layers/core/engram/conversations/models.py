"""Sessions and the messages that start turns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StringConstraints

# The agent's shared session (kernel.ids, below the features that name it), with the session's records.
from engram.kernel.ids import DASHBOARD as DASHBOARD
from engram.kernel.model import Body, Id, Resource


class SessionCreate(Body):
    id: Id | None = None
    title: Annotated[str, StringConstraints(max_length=200)] = ""


class Session(Resource):
    agent_id: str
    title: str = ""
    message_count: int = 0
    # Messages the history cap cut from the transcript so far (CM8): archived and summarised.
    trimmed_count: int = 0
    revision: int = 0
    # The run whose commit the transcript reflects (see conversations.transcripts); not public.
    last_run_id: str | None = Field(default=None, exclude=True)
    # The running summary as stored (CM8); shown by `summary_public` with one session, not in lists.
    summary: dict[str, Any] | None = Field(default=None, exclude=True)


def summary_public(summary: object) -> dict[str, object] | None:
    """The running summary of the cut messages (CM8): its text, how many of the cut messages it
    covers (`coveredCount`, behind `trimmedCount` while a summary is on its way), when and by
    which model it was written (`offline` for the offline summariser)."""
    if not isinstance(summary, dict) or not str(summary.get("text", "")).strip():
        return None
    return {
        "text": str(summary["text"]),
        "coveredCount": int(summary.get("through", 0) or 0),
        "updatedAt": summary.get("updatedAt"),
        "model": summary.get("model"),
    }


class MessageIn(Body):
    message: Annotated[str, StringConstraints(min_length=1)]
    # The turn's idempotency key (as the Idempotency-Key header): a retry returns the first outcome.
    client_turn_id: Id | None = None


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
    # Messages the trim cut and the running summary may not hold yet (CM8), numbered by how many
    # messages the session had cut before them: `cut[k]` is cut message `cut_from + k` (None: one
    # from before an Active Memory reset, never summarised). Stored as the object wrote them,
    # whichever run that was: messages numbered below the session's committed `trimmedCount`
    # are the same in every version.
    cut: list[Any] = field(default_factory=list)
    cut_from: int = 0
