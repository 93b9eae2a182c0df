"""A session turn's context, the conversations feature's side of the engine's `ContextSource`
(engine.context): the transcript's window, the running summary (CM8) and the memory snapshot,
read from and written to the session row as `SessionState`.

Per turn: the transcript is read (one GET, beside the memory sections' reads); the window sent is
its messages since the Active Memory reset (`contextFrom`) and the new one, within the cap; the
system blocks after the memory are the summary's parts with the memory blocks added at cuts among
them (`session_context`), byte for byte those the history's first message was first sent with;
what came since (the memory stored since, a fold that landed late) follows the user's words in
the turn's own message, sent and never stored. The save cuts the transcript in steps
(engine.trim.trim_in_steps) and keeps the cut messages the summary does not hold yet; the commit
writes the counters, the snapshot and what the prompt shows; once committed, a turn that cut
sends the summary's job (conversations.summaries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from engram.conversations.models import History, SessionChanges, SessionState, StoredSnapshot, SummaryShown
from engram.conversations.ports import Transcripts
from engram.conversations.snapshot import AddedMemory, message_digest, session_memory, snapshot_budget
from engram.conversations.summaries.policy import enqueue_summary
from engram.conversations.summaries.view import session_summary
from engram.engine import timeline
from engram.engine.context import MemoryReads, TurnContext
from engram.engine.tools import ToolContext
from engram.engine.trim import sequence_problems, trim_history, trim_in_steps
from engram.kernel.observability import logger
from engram.kernel.ports import JobQueues
from engram.kernel.settings import Settings


class ContextDeps(Protocol):
    """What a session's context needs of the function's dependencies (wiring.ModelDeps), read
    at each turn."""

    @property
    def settings(self) -> Settings: ...
    @property
    def history(self) -> Transcripts: ...
    @property
    def queues(self) -> JobQueues: ...


class SessionContexts:
    """The ContextSource of the functions that run session turns (roots.chat)."""

    def __init__(self, deps: ContextDeps):
        self.deps = deps

    def open(self, ctx: ToolContext, state: SessionState) -> SessionConversation:
        with timeline.step(ctx, "transcript.get"):
            history = self.deps.history.load(ctx.tenant, ctx.agent.id, ctx.session_id, committed_run=state.last_run_id)
        return SessionConversation(self, ctx, state, history, context_start(state, len(history.messages)))


def context_start(state: SessionState, stored: int) -> int:
    """Active Memory reset: the model's context starts after the messages the session held at the
    reset; they stay in the transcript (visible), but are not sent."""
    return min(max(state.context_from, 0), stored)


@dataclass
class SessionConversation:
    """One session turn's conversation (engine.context.Conversation)."""

    source: SessionContexts
    ctx: ToolContext
    state: SessionState
    history: History
    context_from: int
    snapshot: StoredSnapshot | None = None  # a new memory snapshot for the session row
    summary_shown: SummaryShown | None = None  # the summary parts now in the system prompt
    cut: int = 0  # messages the trim cut from the transcript when it was saved
    kept: int = 0  # messages the saved transcript holds
    added: int = 0  # messages the turn added

    # --- the context ------------------------------------------------------------------------------
    def context(self, message: dict[str, Any], memory: MemoryReads) -> TurnContext:
        sent = self._window(message)
        head = message_digest(sent[0])
        view = session_summary(self.state.summary, self.state.summary_shown, head)
        self.summary_shown = view.shown
        after_words = [view.late] if view.late else []
        # A session's snapshot leaves room for the rows stored after it (conversations.snapshot).
        fitted = memory.fit(snapshot_budget(memory.budget_tokens))
        settings = self.source.deps.settings
        # How many messages the session has had, and at most how many more until the next cut
        # (engine.trim.trim_in_steps): the snapshot is kept at a cut when its room lasts that long.
        cap = settings.history_cap
        opening = bool(view.system) and view.lasting_opening
        # A memory block added at this cut goes after the summary's parts the cached prefix held,
        # and after a first part a condensation would keep (a short opening) even when it is new.
        follows = max(view.kept, 1) if opening else view.kept
        shown = session_memory(
            fitted,
            self.state.memory_snapshot,
            head,
            budget_tokens=memory.budget_tokens,
            position=self.state.trimmed_count + len(self.history.messages),
            until_cut=cap - max(2, cap // 2),
            summary_parts=follows,
            idle_s=_idle_s(self.state.updated_at),
            deeper=memory.deeper,
            ranked=lambda: set(memory.fit(memory.budget_tokens).shown),
        )
        self.snapshot = shown.store.stored() if shown.store is not None else None
        after_words += [shown.delta] if shown.delta else []
        if after_words:
            own = sent[-1]
            extra = [{"type": "text", "text": text} for text in after_words]
            sent = [*sent[:-1], {**own, "content": [*own["content"], *extra]}]
        blocks = session_context(view.system, shown.added)
        front = _front(len(view.system), shown.added, opening=opening)
        return TurnContext(memory=shown.text, messages=sent, blocks=blocks, front=front)

    def _window(self, incoming: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages sent: the session's context and the new message, within the cap and
        checked to be a valid sequence."""
        earlier = self.history.messages[self.context_from :]
        # The stored history is within the cap (trimmed in steps when saved): the new message may
        # pass it by one until then, so the first message sent, and the cached prefix, stay put.
        sent = trim_history(earlier + [incoming], self.source.deps.settings.history_cap + 1).kept
        problems = sequence_problems(sent)
        if problems:
            # Never send an invalid sequence; start from this message alone rather than fail.
            logger.error("stored history is not a valid sequence", extra={"problems": problems[:5], "run_id": self.ctx.run_id})
            sent = [incoming]
        return sent

    # --- the save and the commit ----------------------------------------------------------------
    def save(self, messages: list[dict[str, object]], run_id: str) -> int:
        cap = self.source.deps.settings.history_cap
        trimmed = trim_in_steps(self.history.messages + messages, cap)
        self.cut, self.kept, self.added = len(trimmed.trimmed), len(trimmed.kept), len(messages)
        cut, cut_from = self._unsummarised(trimmed.trimmed, keep=2 * cap)
        ctx = self.ctx
        with timeline.step(ctx, "transcript.put"):
            self.source.deps.history.save(
                ctx.tenant,
                ctx.agent.id,
                ctx.session_id,
                trimmed.kept,
                previous=self.history,
                run_id=run_id,
                cut=cut,
                cut_from=cut_from,
            )
        return self.cut

    def _unsummarised(self, trimmed: Sequence[Mapping[str, object]], *, keep: int) -> tuple[list[Any], int]:
        """The cut messages the running summary may not hold yet (CM8), kept in the transcript
        object until a summary covers them: those the session's summary does not cover, and those
        this turn cut. Numbered by the session's count of cut messages, so a summary that failed
        or came late is caught up by the next one. A message from before an Active Memory reset is
        kept as None (never summarised); at most `keep` (the newest)."""
        before = self.state.trimmed_count
        floor = self.state.summarised_through
        history = self.history
        # Messages numbered below the committed count are the same in any version of the object.
        by_number: dict[int, Any] = {
            history.cut_from + k: m for k, m in enumerate(history.cut) if floor <= history.cut_from + k < before
        }
        for k, message in enumerate(trimmed):
            by_number[before + k] = None if k < self.context_from else message
        if not by_number:
            return [], 0
        start = max(min(by_number), before + len(trimmed) - keep)
        return [by_number.get(n) for n in range(start, before + len(trimmed))], start

    def changes(self, state: SessionState, run_id: str) -> SessionChanges:
        context_from = None
        if self.context_from:
            # Trimming drops the oldest messages; the context start moves with them.
            dropped = len(self.history.messages) + self.added - self.kept
            context_from = max(0, self.context_from - dropped)
        return SessionChanges(
            revision=state.revision + 1,
            last_run_id=run_id,
            message_count=self.kept,
            trimmed_count=state.trimmed_count + self.cut if self.cut else None,
            context_from=context_from,
            memory_snapshot=self.snapshot,
            summary_shown=self.summary_shown,
        )

    def committed(self, run_id: str) -> None:
        if self.cut:
            enqueue_summary(self.source.deps.queues, self.ctx, run_id)


def session_context(summary: list[str], added: Sequence[AddedMemory]) -> list[str]:
    """The system blocks after the memory snapshot, in the order they were added: the running
    summary's blocks (one per part) with the memory blocks added at cuts among them, each after
    the parts shown before the cut that added it, in front of the part that cut added (fewer
    parts when the summary was condensed since)."""
    blocks: list[str] = []
    pending = sorted(added, key=lambda block: block.after)  # stable: blocks added at one point keep their order
    for i, part in enumerate([None, *summary]):
        if part is not None:
            blocks.append(part)
        last = i == len(summary)
        while pending and (pending[0].after <= i or last):
            blocks.append(pending.pop(0).text)
    return blocks


def _front(parts: int, added: Sequence[AddedMemory], *, opening: bool) -> int:
    """How many of the blocks after the memory snapshot the summary's next condensation leaves in
    place: the memory blocks in front of the summary (added at cuts and moved there when it was
    last written anew), and, when a condensation keeps its opening (conversations.summaries.view),
    that part and the memory blocks after it. They end where its rewrite leaves the cache: the
    memory's marker goes after them, so every turn keeps that entry alive."""
    if not parts:
        return len(added)
    before = sum(1 for block in added if block.after <= 0)
    if not opening or parts < 2:
        return before
    return before + 1 + sum(1 for block in added if block.after == 1)


def _idle_s(updated_at: str | None) -> float | None:
    """Seconds since the session row was last written (its last turn), None when it does not say."""
    if updated_at is None:
        return None
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(updated_at)).total_seconds()
    except ValueError:
        return None
