"""The seam between a turn and the conversation it continues: `ContextSource`, beside `ToolSource`.

The engine runs a turn (lease, prompt, tool loop, one commit) and knows no feature's storage. A
session turn's context (the transcript's window, the running summary, the memory snapshot and
what was added to it, what the session row keeps of them) is the conversations feature's: it
implements `ContextSource` (conversations.context), given to the engine by the composition roots
through `ModelDeps.context_source`. Per turn the engine opens a `Conversation` with the session's
state (read with the lease), asks it for the turn's `TurnContext` (the system blocks after the
persona, and the messages to send), hands it the turn's messages to save, takes the session's
changes for its commit, and tells it when the turn is committed.

    engine.turn ──open(ctx, state)──▶ Conversation ──context(message, memory)──▶ TurnContext
         │                                │ save(messages) ─▶ cut        changes() ─▶ SessionChanges
         └── commit (run, usage, session) ┘ committed(run_id): the running summary's job
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engram.conversations.models import SessionChanges, SessionState
from engram.engine.prompt import MemoryView
from engram.engine.tools import ToolContext


@dataclass(frozen=True)
class MemoryReads:
    """The turn's memory sections as read beside the transcript (engine.prompt): `fit` gives them
    fitted to a budget, `deeper` the entry lines of their deeper pages (read when called),
    `budget_tokens` the sections' whole budget."""

    fit: Callable[[int], MemoryView]
    deeper: Callable[[], set[str]]
    budget_tokens: int


@dataclass(frozen=True)
class TurnContext:
    """What a turn sends beside its tools and persona: the memory sections' block (`memory`, ""
    for none), the blocks after it (the running summary's parts and the memory added at cuts, the
    last one marked for the cache), the messages, the turn's own last, and how many of `blocks`
    lead the others as memory does (`front`: the cache marker of the memory goes after them)."""

    memory: str
    messages: list[dict[str, Any]]
    blocks: list[str] = field(default_factory=list)
    front: int = 0


class Conversation(Protocol):
    """One session turn's conversation, opened with the transcript read."""

    def context(self, message: dict[str, Any], memory: MemoryReads) -> TurnContext:
        """The turn's context, `message` the user's new message."""
        ...

    def save(self, messages: list[dict[str, object]], run_id: str) -> int:
        """Saves the transcript with the turn's `messages` (conditional on the version read;
        SessionBusy when it changed); how many messages the history cap cut."""
        ...

    def changes(self, state: SessionState, run_id: str) -> SessionChanges:
        """What the turn's commit writes on the session row (after `save`)."""
        ...

    def committed(self, run_id: str) -> None:
        """The turn is committed: best-effort follow-up (the running summary's job after a cut)."""
        ...


class ContextSource(Protocol):
    """Opens a session turn's conversation: its transcript read (one GET), beside the memory
    sections' and the policies' reads."""

    def open(self, ctx: ToolContext, state: SessionState) -> Conversation: ...
