"""Ports of agents and workspaces: what services need from their storage (wiring.Stores provides the DynamoDB
repositories; tests run them on an in-memory table). Below them, what an agent's creation, change and
deletion reach of other features, typed here by shape: those features import the agents, not the
other way round."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor
from typing import NamedTuple, Protocol

from engram.agents.models import Agent, Workspace
from engram.cards.ports import CardTypes
from engram.kernel.settings import Settings


class WebhookCredentials(NamedTuple):
    """What verifies an agent's webhook: its tenant, its secret and, for a while after a rotation,
    the secret it replaced (`previous_until`: unix seconds; 0 when there is none)."""

    tenant: str
    secret: str
    previous: str = ""
    previous_until: int = 0


class Workspaces(Protocol):
    """A tenant's workspaces."""

    def put(self, tenant: str, ws: Workspace) -> None: ...

    def get(self, tenant: str, workspace_id: str) -> Workspace | None: ...

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[Workspace], str | None]: ...

    def update(self, tenant: str, workspace_id: str, changes: dict[str, object]) -> Workspace: ...

    def delete(self, tenant: str, workspace_id: str) -> None: ...

    def exists_op(self, tenant: str, workspace_id: str) -> dict[str, object]:
        """A transaction's check that the workspace exists (an agent joining it)."""
        ...


class Agents(Protocol):
    """A tenant's agents, with the webhook secret and the agent-id-to-tenant lookup."""

    def create(
        self,
        tenant: str,
        agent: Agent,
        *,
        webhook_secret: str,
        with_items: list[dict[str, object]],
        max_agents: int,
        max_scheduled: int,
    ) -> None:
        """The agent, `with_items` (its `dashboard` session) and the workspace check commit together
        or not at all."""
        ...

    def get(self, tenant: str, agent_id: str) -> Agent | None: ...

    def webhook_credentials(self, agent_id: str) -> WebhookCredentials | None:
        """The tenant and webhook secrets of an agent id, in one lookup; None for an unknown agent."""
        ...

    def rotate_webhook_secret(self, tenant: str, agent_id: str, secret: str, *, previous_until: int) -> None:
        """`secret` becomes the agent's webhook secret; the one it replaces stays valid until
        `previous_until` (an older previous one is dropped). NotFound for an unknown agent."""
        ...

    def first_delivery(self, tenant: str, agent_id: str, digest: str, *, expires_at: int) -> bool:
        """Records a signed webhook request; False when it was seen before (a replay)."""
        ...

    def forget_delivery(self, tenant: str, agent_id: str, digest: str) -> None:
        """Removes the record of a signed webhook request whose turn was not queued."""
        ...

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[Agent], str | None]: ...

    def in_workspace(self, tenant: str, workspace_id: str) -> list[str]: ...

    def update(
        self, tenant: str, agent_id: str, changes: dict[str, object], *, scheduling: int = 0, max_scheduled: int = 0
    ) -> Agent: ...

    def forget_quotas(self, tenant: str) -> None:
        """The account is gone: so are its agent counters."""
        ...

    def delete_cascade(self, tenant: str, agent_id: str) -> list[str]:
        """Deletes the agent's runs, everything in its partition (sessions, memories, archive, run
        memory, markers) and, last, the agent row; returns the session ids. Children go first, so
        a retry after a partial failure finishes the job."""
        ...


class AgentSessions(Protocol):
    """The agent's sessions (conversations.ports.Sessions): its `dashboard`, written with the agent,
    and the Active Memory reset."""

    def dashboard_item(self, tenant: str, agent_id: str, now: str) -> dict[str, object]: ...

    def reset_context(self, tenant: str, agent_id: str, session_id: str, *, wait_s: float) -> dict[str, object]: ...


class AgentSchedules(Protocol):
    """The agent's heartbeat schedule (runs.ports.Schedules)."""

    def put(self, tenant: str, agent_id: str, expression: str) -> None: ...

    def delete(self, agent_id: str) -> bool: ...


class GrantedConnections(Protocol):
    """The connections an agent's `tools` name (connections.ports.Connections): those found, by id."""

    def get_many_with_secrets(self, tenant: str, connection_ids: list[str]) -> Mapping[str, object]: ...


class AgentTranscripts(Protocol):
    """Every transcript of an agent (conversations.ports.Transcripts), removed with it."""

    def delete_agent(self, tenant: str, agent_id: str) -> int: ...


class OwnedMemories(Protocol):
    """The memory rows of a workspace (memory.ports.Memories), removed with it."""

    def delete_owner(self, tenant: str, scope: str, owner_id: str) -> int: ...


class AgentStores(Protocol):
    """What creating, changing and deleting an agent reach (wiring.Stores provides it). Read as
    attributes, so the scheduler and the thread pool are still made only when a use case needs them."""

    @property
    def settings(self) -> Settings: ...

    @property
    def agents(self) -> Agents: ...

    @property
    def card_types(self) -> CardTypes: ...

    @property
    def connections(self) -> GrantedConnections: ...

    @property
    def sessions(self) -> AgentSessions: ...

    @property
    def schedules(self) -> AgentSchedules: ...

    @property
    def history(self) -> AgentTranscripts: ...

    @property
    def executor(self) -> Executor: ...
