"""Sessions and the messages that start turns."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

# The agent's shared session (kernel.ids, below the features that name it), with the session's records.
from engram.kernel.ids import DASHBOARD as DASHBOARD
from engram.kernel.model import Body, Id, Resource
from engram.kernel.secrets import find_secret


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


class TurnJob(BaseModel):
    """A queued turn (`?async=true`, a webhook, a socket's `turn`) as the turn queue carries it:
    written by `chat.enqueue_turn`, read by `chat.process_turn_job`."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    run_id: str
    tenant: str
    agent_id: str
    session_id: str
    message: str
    kind: Literal["chat"] = "chat"
    trigger: str = "async"
    created_at: str | None = None
    client_turn_id: str | None = None  # named in the turn's events, so its sender knows them

    def body(self) -> dict[str, object]:
        """The queue message's body (camelCase, absent fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)


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


# --- a session's state as a turn and the summary worker read and write it -----------------------


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class RunningSummary:
    """The running summary of what the history cap cut (CM8), as the session row keeps it: its
    text, how many lines each fold appended (`parts`; the prompt shows each as a block of its own),
    how many of the cut messages it covers (`through`), when and by which model it was written."""

    text: str
    parts: tuple[int, ...] = ()
    through: int = 0
    updated_at: str = ""
    model: str = ""

    @classmethod
    def of(cls, value: object) -> "RunningSummary | None":
        if not isinstance(value, dict):
            return None
        parts = value.get("parts")
        counts = tuple(n for n in parts if isinstance(n, int)) if isinstance(parts, list) else ()
        return cls(
            text=_str(value.get("text")) or "",
            # parts that are not counts of lines read as none: the summary is then one part
            parts=counts if isinstance(parts, list) and len(counts) == len(parts) else (),
            through=_int(value.get("through")),
            updated_at=_str(value.get("updatedAt")) or "",
            model=_str(value.get("model")) or "",
        )

    def item(self) -> dict[str, object]:
        return {
            "text": self.text,
            "parts": list(self.parts),
            "through": self.through,
            "updatedAt": self.updated_at,
            "model": self.model,
        }


@dataclass(frozen=True)
class SummaryShown:
    """Which of the summary's parts the system prompt shows since the history's first message
    (`head`, its digest) was first sent: how many, their digest, and the first part's alone
    (`opening`: a condensation may keep it, conversations.summaries.view.kept_opening); no text."""

    head: str
    parts: int
    digest: str
    opening: str = ""

    @classmethod
    def of(cls, value: object) -> "SummaryShown | None":
        if not isinstance(value, dict) or not isinstance(value.get("parts"), int):
            return None
        return cls(
            head=str(value.get("head", "")),
            parts=value["parts"],
            digest=str(value.get("digest", "")),
            opening=str(value.get("opening", "")),
        )

    def item(self) -> dict[str, object]:
        return {
            "head": self.head,
            "parts": self.parts,
            "digest": self.digest,
            **({"opening": self.opening} if self.opening else {}),
        }


@dataclass(frozen=True)
class StoredBlock:
    """A block of memory text as a session row keeps it: the text with each entry line replaced by
    a slot, and each entry's digest (never the stored text); `after`: for a block added at a cut,
    how many of the running summary's parts precede it."""

    template: str
    digests: tuple[str, ...]
    after: int | None = None

    @classmethod
    def of(cls, value: object) -> "StoredBlock | None":
        if not isinstance(value, dict) or not isinstance(value.get("template"), str):
            return None  # none, or one stored as text before digests: taken again
        after = value.get("after")
        return cls(
            value["template"], tuple(str(d) for d in value.get("digests") or []), after if isinstance(after, int) else None
        )

    def item(self) -> dict[str, object]:
        return {
            "template": self.template,
            "digests": list(self.digests),
            **({"after": self.after} if self.after is not None else {}),
        }


@dataclass(frozen=True)
class StoredSnapshot:
    """The memory snapshot a session's context started with (conversations.snapshot), as stored:
    its block, the digest of the history's first message it was sent with (`head`), how many
    messages the session had had when it was taken (`at`), and the blocks added at cuts."""

    block: StoredBlock
    head: str = ""
    at: int = 0
    added: tuple[StoredBlock, ...] = ()

    @classmethod
    def of(cls, value: object) -> "StoredSnapshot | None":
        block = StoredBlock.of(value)
        if block is None or not isinstance(value, dict):
            return None
        added = [StoredBlock.of(b) for b in value.get("added") or []]
        if any(b is None or b.after is None for b in added):
            return None
        return cls(
            StoredBlock(block.template, block.digests),
            str(value.get("head", "")),
            _int(value.get("at")),
            tuple(b for b in added if b),
        )

    def item(self) -> dict[str, object]:
        added = [b.item() for b in self.added]
        return {**self.block.item(), "head": self.head, "at": self.at, **({"added": added} if added else {})}


@dataclass(frozen=True)
class SessionState:
    """A session row as a turn, the summary worker and the Active Memory panel read it: counters,
    the lease, the running summary, the memory snapshot and what the prompt shows of them. The
    rules about them are here (`summarised_through`), written once."""

    revision: int = 0
    message_count: int = 0
    trimmed_count: int = 0  # messages the history cap cut so far (CM8)
    context_from: int = 0  # Active Memory reset: the model's context starts at this message
    summary_from: int = 0  # cut messages before this one (an Active Memory reset) are never summarised
    last_run_id: str | None = None  # the run whose commit the transcript reflects
    title: str = ""
    updated_at: str | None = None
    last_reset_at: str | None = None
    lease_owner: str | None = None
    summary: RunningSummary | None = None
    summary_shown: SummaryShown | None = None
    memory_snapshot: StoredSnapshot | None = None
    counters: Mapping[str, int] = field(default_factory=dict)  # runsSinceReset, revisionAtReset, ...

    # the Active Memory panel's counters (runs.active_memory), which a turn plan may count up
    COUNTERS: ClassVar[tuple[str, ...]] = ("runsSinceReset", "revisionAtReset")

    @classmethod
    def of(cls, item: Mapping[str, object]) -> "SessionState":
        return cls(
            revision=_int(item.get("revision")),
            message_count=_int(item.get("messageCount")),
            trimmed_count=_int(item.get("trimmedCount")),
            context_from=_int(item.get("contextFrom")),
            summary_from=_int(item.get("summaryFrom")),
            last_run_id=_str(item.get("lastRunId")),
            title=_str(item.get("title")) or "",
            updated_at=_str(item.get("updatedAt")),
            last_reset_at=_str(item.get("lastResetAt")),
            lease_owner=_str(item.get("leaseOwner")),
            summary=RunningSummary.of(item.get("summary")),
            summary_shown=SummaryShown.of(item.get("summaryShown")),
            memory_snapshot=StoredSnapshot.of(item.get("memorySnapshot")),
            counters={name: _int(item.get(name)) for name in cls.COUNTERS},
        )

    @property
    def summarised_through(self) -> int:
        """How many of the cut messages need no summary: those the summary covers, and those cut
        before the last Active Memory reset (never summarised)."""
        return max(self.summary.through if self.summary else 0, self.summary_from)


@dataclass(frozen=True)
class SessionChanges:
    """What a successful turn's commit writes on its session row (with the lease's release)."""

    revision: int
    last_run_id: str
    message_count: int
    trimmed_count: int | None = None  # set when the turn cut messages
    context_from: int | None = None  # set when an Active Memory reset's start moved with a cut
    memory_snapshot: StoredSnapshot | None = None  # None: unchanged
    summary_shown: SummaryShown | None = None  # None: unchanged
    title: str | None = None  # None: unchanged
    counters: Mapping[str, int] = field(default_factory=dict)

    def attributes(self) -> dict[str, object]:
        """The session row's attributes these changes set (conversations.repository.commit_op)."""
        out: dict[str, object] = {"revision": self.revision, "messageCount": self.message_count, "lastRunId": self.last_run_id}
        if self.trimmed_count is not None:
            out["trimmedCount"] = self.trimmed_count
        if self.context_from is not None:
            out["contextFrom"] = self.context_from
        out.update(self.counters)
        if self.memory_snapshot is not None:
            out["memorySnapshot"] = self.memory_snapshot.item()
        if self.summary_shown is not None:
            out["summaryShown"] = self.summary_shown.item()
        if self.title is not None:
            out["title"] = self.title
        return out


# A session's title: the start of its first message (engine.turn sets it with the first turn).
TITLE_CHARS = 60
TITLE_SCAN_CHARS = 4_000  # longer than any key format whose first 60 characters alone give it away
UNTITLED = "Untitled session"


def session_title(message: str) -> str:
    """The first TITLE_CHARS characters of a session's first message, unless the message holds a
    secret: the transcript keeps it, a title (shown in every list) gets UNTITLED instead. The scan
    reads a bounded prefix, long enough to hold any secret that reaches into the title."""
    if find_secret(message[:TITLE_SCAN_CHARS]):
        return UNTITLED
    return message[:TITLE_CHARS]
