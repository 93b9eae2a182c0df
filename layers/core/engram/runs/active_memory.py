"""Active Memory (AM1-AM3): heartbeats and chat share the agent's main session when it is on.

The shared context is the `dashboard` session. A reset (or enabling the toggle) moves the session's
context start to its current end: the model's next run starts fresh while the messages stay in the
transcript, visible to the user. The session item carries the panel's counters (`runsSinceReset`,
`lastResetAt`, `revisionAtReset`), updated in the same transaction as each run.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from engram.kernel.errors import NotFound
from engram.kernel.ids import DASHBOARD, check_id
from engram.runs.models import ActiveMemoryStatus

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from engram.agents.ports import Agents
    from engram.kernel.settings import Settings
    from engram.runs.ports import SharedSessions


class PanelDeps(Protocol):
    """What the Active Memory panel reads and its reset writes (wiring.Stores is one); read as
    attributes, so the thread pool is made only when the panel is read."""

    @property
    def settings(self) -> Settings: ...
    @property
    def agents(self) -> Agents: ...
    @property
    def sessions(self) -> SharedSessions: ...
    @property
    def executor(self) -> Executor: ...


def _age_seconds(stamp: str | None) -> int | None:
    if not stamp:
        return None
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0, int((datetime.now(UTC) - then).total_seconds()))


def _count(session: Mapping[str, object], name: str) -> int:
    value = session.get(name)
    return int(value) if isinstance(value, int | float | Decimal) else 0


def _stamp(session: Mapping[str, object], name: str) -> str | None:
    value = session.get(name)
    return value if isinstance(value, str) else None


def status(deps: PanelDeps, tenant: str, agent_id: str) -> ActiveMemoryStatus:
    """GET /api/agents/{agentId}/active-memory: the panel's data (AM3)."""
    agent_future = deps.executor.submit(deps.agents.get, tenant, check_id("agentId", agent_id))
    found = deps.sessions.get(tenant, agent_id, DASHBOARD)
    agent = agent_future.result()
    if agent is None:
        raise NotFound("agent not found", field="agentId")
    session = found or {}
    revision = _count(session, "revision")
    runs = _count(session, "runsSinceReset")
    limit = deps.settings.active_memory_warn_runs
    warning = None
    if runs > limit:
        warning = (
            f"{runs} runs since the last reset (more than {limit}): the shared context keeps growing, "
            "which makes every run slower and costlier; reset it to start fresh"
        )
    carrying = revision > _count(session, "revisionAtReset")
    # Sessions last committed before contextStartedAt existed: since the reset, else since created.
    started = (
        (_stamp(session, "contextStartedAt") or _stamp(session, "lastResetAt") or _stamp(session, "createdAt"))
        if carrying
        else None
    )
    return ActiveMemoryStatus(
        agent_id=agent.id,
        enabled=agent.active_memory,
        status="carrying_context" if carrying else "fresh",
        runs_since_reset=runs,
        session_age_seconds=_age_seconds(started),
        context_started_at=started,
        last_active_at=_stamp(session, "updatedAt"),
        last_active_seconds=_age_seconds(_stamp(session, "updatedAt")),
        last_reset_at=_stamp(session, "lastResetAt"),
        session_revision=revision,
        warning=warning,
    )


def reset(deps: PanelDeps, tenant: str, agent_id: str) -> ActiveMemoryStatus:
    """POST .../active-memory/reset, and what enabling the toggle does (AM2). Waits for a run that
    holds the session, like a chat turn would, so a reset is never lost under a finishing run."""
    check_id("agentId", agent_id)
    if deps.agents.get(tenant, agent_id) is None:
        raise NotFound("agent not found", field="agentId")
    deps.sessions.reset_context(tenant, agent_id, DASHBOARD, wait_s=deps.settings.session_wait_s)
    return status(deps, tenant, agent_id)
