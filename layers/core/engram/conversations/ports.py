"""Ports of conversations: session rows (and the lease a turn holds) and transcripts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from engram.conversations.models import History, RunningSummary, Session, SessionState


class Sessions(Protocol):
    """Session rows: counters, the lease one turn or run holds, the Active Memory reset."""

    def item(self, tenant: str, session: Session) -> dict[str, object]: ...

    def dashboard_item(self, tenant: str, agent_id: str, now: str) -> dict[str, Any]:
        """The item of an agent's `dashboard` session, written in the agent's own creation."""
        ...

    def create(self, tenant: str, session: Session, *, limit: int, if_absent_ok: bool = False) -> bool:
        """Creates a session of an existing agent; False when it already existed and if_absent_ok."""
        ...

    def get(self, tenant: str, agent_id: str, session_id: str) -> dict[str, Any] | None: ...

    def state(self, tenant: str, agent_id: str, session_id: str) -> SessionState | None:
        """The session row as a turn and the summary worker read it; None when there is none."""
        ...

    def page(self, tenant: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Session], str | None]: ...

    def delete(self, tenant: str, agent_id: str, session_id: str) -> None:
        """Refused while a turn holds the session, so a running turn cannot resurrect it."""
        ...

    def acquire_lease(self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float) -> SessionState:
        """Takes the session for one turn (or run, or reset); returns its state."""
        ...

    def wait_for_lease(
        self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float, wait_s: float, busy_message: str
    ) -> SessionState:
        """acquire_lease, waiting up to `wait_s` (with backoff) while another turn, run or reset
        holds the session; then SessionBusy with `busy_message`."""
        ...

    def renew_lease(self, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float) -> bool:
        """Extends a lease this owner holds to `ttl_s` from now; False when it is not held any more."""
        ...

    def release_lease(self, tenant: str, agent_id: str, session_id: str, owner: str) -> None: ...

    def clear_awaiting(self, tenant: str, agent_id: str, session_id: str, run_id: str) -> None:
        """A paused run that will never resume (TL10): its session takes turns again."""
        ...

    def commit_op(
        self, tenant: str, agent_id: str, session_id: str, owner: str, changes: dict[str, object] | None, now: str
    ) -> dict[str, object]:
        """A turn's commit, as one operation of its transaction: the counters it changes (a
        successful turn) and the release of its lease, conditional on still holding it."""
        ...

    def store_summary(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        summary: RunningSummary,
        *,
        was: RunningSummary | None,
        reset_at: str | None,
    ) -> bool:
        """Sets the session's running summary (CM8) if it is still `was` (the summary the worker
        read, None for none) and no Active Memory reset happened since `reset_at`; False if not."""
        ...

    def reset_context(self, tenant: str, agent_id: str, session_id: str, *, wait_s: float) -> dict[str, object]:
        """Active Memory reset: the model's context starts after the messages the session holds now
        (they stay in the transcript); the run counter restarts. Taken under the session's lease,
        waiting for a turn or run that holds it, so a reset is never lost under a finishing run."""
        ...


class Transcripts(Protocol):
    """One transcript per session, written only over the version that was read."""

    def load(self, tenant: str, agent_id: str, session_id: str, *, committed_run: str | None) -> History:
        """The transcript as of the session's committed run (`lastRunId` of the session row)."""
        ...

    def save(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        messages: list[dict[str, object]],
        *,
        previous: History,
        run_id: str,
        cut: list[Any] | None = None,
        cut_from: int = 0,
    ) -> str:
        """Conditional PUT over the object the turn read; SessionBusy if someone wrote since.
        `cut`: the messages cut by the trim that the running summary may not hold yet, the first
        numbered `cut_from` (see History)."""
        ...

    def delete(self, tenant: str, agent_id: str, session_id: str) -> None: ...

    def delete_agent(self, tenant: str, agent_id: str) -> int:
        """Removes every transcript of an agent (all its sessions); returns how many."""
        ...

    def put_tool_result(self, tenant: str, agent_id: str, run_id: str, tool_use_id: str, result: dict[str, object]) -> None:
        """The full result of a tool call whose content was cut before it reached the model."""
        ...

    def get_tool_result(self, tenant: str, agent_id: str, run_id: str, tool_use_id: str) -> dict[str, object] | None: ...

    def tool_results(self, tenant: str, agent_id: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Every kept full tool result of an agent: (run id, tool_use id, result)."""
        ...
