"""Ports of runs: run records (and the end-of-turn commit) and the agents' heartbeat schedules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from engram.runs.models import Run
from engram.usage.models import UsageRow


class SessionCommits(Protocol):
    """What the end-of-turn commit needs of the sessions (conversations.repository provides it):
    the session's side of the turn's one transaction."""

    def commit_op(
        self, tenant: str, agent_id: str, session_id: str, owner: str, changes: Mapping[str, object] | None, now: str
    ) -> dict[str, object]: ...

    def pause_op(self, tenant: str, agent_id: str, session_id: str, owner: str) -> dict[str, object]:
        """A paused turn's side of its transaction (TL10): the session marked as waiting for the
        run's approvals and its lease released, conditional on still holding it."""
        ...


class Traces(Protocol):
    """Runs' timelines (OB1, runs.traces): the turn's part goes in its commit (`item`), a job's is `put`."""

    def item(self, tenant: str, run: Run, trace: Mapping[str, object], part: str = "turn") -> dict[str, object]: ...
    def put(self, tenant: str, run: Run, trace: Mapping[str, object], part: str) -> None: ...
    def parts(self, tenant: str, agent_id: str, run_id: str) -> list[dict[str, object]]: ...
    def agent_parts(self, tenant: str, agent_id: str) -> list[dict[str, object]]: ...


class Runs(Protocol):
    """Run records of a tenant, claims on queued runs, the stale-run sweep, and the end-of-turn commit."""

    @property
    def traces(self) -> Traces: ...

    def item(self, tenant: str, run: Run) -> dict[str, object]: ...

    def create(self, tenant: str, run: Run) -> bool:
        """Records a queued run; False if a run with this id already exists (a redelivered firing)."""
        ...

    def fail_unfinished(self, tenant: str, run: Run) -> bool:
        """Records `run` (failed) unless its record says it finished: a queued or running record is
        marked failed with its error, a missing one is created. False: finished, nothing changed."""
        ...

    def put(self, tenant: str, run: Run, *, only_if_new: bool = False) -> None: ...

    def get(self, tenant: str, run_id: str) -> Run | None: ...

    def page(self, tenant: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Run], str | None]: ...
    def newest(self, tenant: str, *, agent_id: str | None, before: str | None, max_items: int) -> list[Run]: ...

    def delete_all(self, tenant: str) -> int:
        """Every run row of the tenant (an account deletion; agent deletion removes its own)."""
        ...

    def start(self, tenant: str, run_id: str, *, claim_s: float, waiting: bool = False) -> Run | None:
        """Claims a queued run for one worker (status running, a claim that expires after `claim_s`,
        so a crashed worker's run can be taken again). None: finished, or another worker has it.
        `waiting`: a decided run's resumption (TL10), claimed once."""
        ...

    def requeue(self, tenant: str, run_id: str) -> None:
        """Gives a claimed run back (its session was busy): the retry claims it again."""
        ...

    def stale(self, *, now: int | None = None, limit: int = 100) -> list[tuple[str, str, str]]:
        """Unfinished runs past their stale time, across tenants: (tenant, run id, stale key)."""
        ...

    def fail_stale(self, tenant: str, run_id: str, seen: str) -> bool:
        """Marks a stale run failed (`stale`) unless it finished or moved on since it was seen."""
        ...

    def finish_turn(
        self,
        tenant: str,
        *,
        run: Run,
        usage_rows: list[UsageRow],
        session_changes: dict[str, object] | None,
        extra_items: list[dict[str, object]] | None = None,
        paused: bool = False,
    ) -> None:
        """Ends a turn in one transaction: the run record, its usage, and the session's lease.

        `session_changes` (successful turns) bumps the revision and counters in the same write;
        a run can only be finished once (a redelivered job cannot double-count).
        `extra_items` (plain attribute dicts with their keys, e.g. the turn's archived messages)
        are Puts of the same transaction, up to 90 items in all (DynamoDB allows 100); any
        overflow is written after the transaction commits, with BatchWriteItem. `paused` (TL10):
        the turn stops for its owner's approval; the session waits for the run, its lease released."""
        ...


class RunDecisions(Protocol):
    """Runs read and annotated as decisions: resolutions, re-examinations and their convictions,
    the runs whose result holds a card."""

    def set_resolution(self, tenant: str, run_id: str, status: str) -> Run: ...

    def set_latest_conviction(
        self, tenant: str, parent_run_id: str, *, score: int, child_run_id: str, child_created_at: str
    ) -> None:
        """The parent run shows its newest re-examination's conviction; its result never changes.
        An older re-examination finishing late does not overwrite a newer one."""
        ...

    def list_reexaminations(
        self, tenant: str, parent_run_id: str, *, limit: int, token: str | None
    ) -> tuple[list[Run], str | None]: ...

    def recent_with_cards(self, tenant: str, agent_id: str, *, limit: int, page: int = 25, max_pages: int = 4) -> list[Run]:
        """The agent's newest runs whose result holds a card: its runs through GSI1 newest first,
        a bounded number of small pages (at most `page * max_pages` runs are read)."""
        ...

    def with_cards_page(
        self, tenant: str, agent_id: str, *, limit: int, token: str | None, page: int = 25, max_pages: int = 4
    ) -> tuple[list[Run], str | None]: ...


class Schedules(Protocol):
    """One EventBridge Scheduler schedule per agent with a heartbeat."""

    @property
    def group(self) -> str: ...

    def put(self, tenant: str, agent_id: str, expression: str) -> None:
        """Create the agent's schedule, or replace it when it exists (same definition either way)."""
        ...

    def delete(self, agent_id: str) -> bool:
        """Remove the agent's schedule; False when there was none."""
        ...

    def get(self, agent_id: str) -> dict[str, object] | None:
        """The GetSchedule response, or None when the agent has no schedule."""
        ...


class TurnAdmissions(Protocol):
    """A queued turn's admission: its run, its active-turn row and its clientTurnId's claim in one
    transaction (ST4), the tenant's active turns counted for the cap (ST7)."""

    def create_turn(self, tenant: str, run: Run, *, client_turn_id: str | None, ttl_s: int, counted: bool = True) -> Run | None:
        """Records a queued turn, its row among the tenant's active turns and the claim of the
        client's id of the turn (scoped to its agent and session) in one transaction (ST4, ST7).
        None: written; else the run an earlier claim of the same id names, and nothing is written."""
        ...

    def claimed(self, tenant: str, run: Run, client_turn_id: str) -> Run | None:
        """The run a live claim of `client_turn_id` on `run`'s agent and session names, if any."""
        ...

    def active_turns(self, tenant: str) -> int:
        """The tenant's turns queued or running (ST7)."""
        ...

    def end_turn(self, tenant: str, run_id: str) -> None:
        """The turn no longer counts against the tenant's cap."""
        ...

    def drop_claim(self, tenant: str, run: Run, *, client_turn_id: str) -> None:
        """Removes a claim and its run while the run is still queued (the turn never started: a
        retry with the same id runs it). Raises when storage does not answer."""
        ...


class ToolResults(Protocol):
    """The full results of a run's tool calls, kept beside its transcript when cut for the model
    (conversations.ports.Transcripts is one)."""

    def get_tool_result(self, tenant: str, agent_id: str, run_id: str, tool_use_id: str) -> dict[str, object] | None: ...


class SharedSessions(Protocol):
    """The agent's shared `dashboard` session as the Active Memory panel reads and resets it
    (conversations.ports.Sessions is one)."""

    def get(self, tenant: str, agent_id: str, session_id: str) -> Mapping[str, object] | None: ...

    def reset_context(self, tenant: str, agent_id: str, session_id: str, *, wait_s: float) -> dict[str, object]: ...
