"""Use cases of sessions: create, list, read (with the transcript), delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from engram.conversations.models import DASHBOARD, Session, SessionCreate, summary_public
from engram.kernel.errors import NotFound
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import now_iso, page
from engram.kernel.validation import refuse_secrets

if TYPE_CHECKING:
    from engram.agents.ports import Agents
    from engram.conversations.ports import Sessions, Transcripts
    from engram.kernel.settings import Settings
    from engram.memory.ports import Memories
    from engram.recall.ports import Archive


class SessionStores(Protocol):
    """What deleting a session reaches (wiring.Stores provides it): the session, its transcript,
    its archived turns and its conversation memories."""

    @property
    def settings(self) -> Settings: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def agents(self) -> Agents: ...

    @property
    def history(self) -> Transcripts: ...

    @property
    def archive(self) -> Archive: ...

    @property
    def memories(self) -> Memories: ...


def _session_public(item: Mapping[str, object]) -> dict[str, object]:
    return Session.model_validate(item).public()


def create_session(sessions: Sessions, settings: Settings, tenant: str, agent_id: str, body: SessionCreate) -> Session:
    refuse_secrets("title", body.title)  # a title is listed everywhere; the model bounds its length
    now = now_iso()
    session = Session(
        id=body.id or new_id("s"), agent_id=check_id("agentId", agent_id), created_at=now, updated_at=now, title=body.title
    )
    sessions.create(tenant, session, limit=settings.max_sessions_per_agent)
    return session


def list_sessions(
    sessions: Sessions, agents: Agents, tenant: str, agent_id: str, limit: int, token: str | None
) -> dict[str, object]:
    items, nxt = sessions.page(tenant, agent_id, limit=limit, token=token)
    # An empty list and an unknown agent are different answers.
    if not items and not token and agents.get(tenant, agent_id) is None:
        raise NotFound("agent not found", field="agentId")
    return page(items, nxt)


def get_session(
    sessions: Sessions, agents: Agents, history: Transcripts, tenant: str, agent_id: str, session_id: str
) -> dict[str, object]:
    item = sessions.get(tenant, agent_id, session_id)
    if item is None:
        if agents.get(tenant, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    transcript = history.load(tenant, agent_id, session_id, committed_run=item.get("lastRunId"))
    # Where the model's context starts (an Active Memory reset leaves the older messages on show).
    context_from = min(int(item.get("contextFrom", 0) or 0), len(transcript.messages))
    return {
        **_session_public(item),
        "summary": summary_public(item.get("summary")),
        "messages": transcript.messages,
        "contextFrom": context_from,
        "lastResetAt": item.get("lastResetAt"),
        # The run whose commit `messages` reflects (run ids are time-ordered): a page showing a
        # turn live knows from it that the turn's reply is in the transcript.
        "lastRunId": item.get("lastRunId"),
    }


def delete_session(deps: SessionStores, tenant: str, agent_id: str, session_id: str) -> dict[str, object]:
    """Deletes the history (never long-term memory). `dashboard` always exists: it is emptied."""
    item = deps.sessions.get(tenant, agent_id, session_id)
    if item is None:
        if deps.agents.get(tenant, agent_id) is None:
            raise NotFound("agent not found", field="agentId")
        raise NotFound("session not found", field="sessionId")
    deps.sessions.delete(tenant, agent_id, session_id)  # refused while a turn holds it
    deps.history.delete(tenant, agent_id, session_id)
    deps.archive.delete_session(tenant, agent_id, session_id)  # before dashboard is re-created
    deps.memories.delete_session_memories(tenant, agent_id, session_id)
    if session_id == DASHBOARD:
        now = now_iso()
        deps.sessions.create(
            tenant,
            Session(id=DASHBOARD, agent_id=agent_id, created_at=now, updated_at=now, title="Dashboard"),
            limit=deps.settings.max_sessions_per_agent,
            if_absent_ok=True,
        )
    return {"id": session_id, "deleted": True}
