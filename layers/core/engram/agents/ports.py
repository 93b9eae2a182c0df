"""Ports of agents and workspaces: what services need from their storage (wiring.Stores provides the DynamoDB
repositories; tests run them on an in-memory table)."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from engram.agents.models import Agent, Workspace


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
