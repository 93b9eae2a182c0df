"""Workspaces and agents in the single table (the tenant's partition), and the webhook lookup."""

from __future__ import annotations

from typing import Any

from engram.agents.models import Agent, Workspace
from engram.agents.ports import WebhookCredentials
from engram.aws import keys, quotas
from engram.aws.items import set_expression
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import NotFound

_WORKSPACE_NOT_FOUND = "workspace not found"


class WorkspaceRepository:
    def __init__(self, table: Table):
        self.table = table

    def put(self, tenant: str, ws: Workspace) -> None:
        item = {"PK": keys.tenant_pk(tenant), "SK": keys.workspace_sk(ws.id), **ws.model_dump(by_alias=True)}
        self.table.put(item, condition="attribute_not_exists(PK)")

    def get(self, tenant: str, workspace_id: str) -> Workspace | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.workspace_sk(workspace_id))
        return Workspace.model_validate(item) if item else None

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[Workspace], str | None]:
        items, nxt = self.table.query(keys.tenant_pk(tenant), sk_prefix="WS#", limit=limit, token=token)
        return [Workspace.model_validate(i) for i in items], nxt

    def update(self, tenant: str, workspace_id: str, changes: dict[str, object]) -> Workspace:
        try:
            item = self.table.set_fields(keys.tenant_pk(tenant), keys.workspace_sk(workspace_id), changes)
        except ConditionFailed:
            raise NotFound(_WORKSPACE_NOT_FOUND, field="workspaceId") from None
        return Workspace.model_validate(item)

    def delete(self, tenant: str, workspace_id: str) -> None:
        try:
            self.table.delete(keys.tenant_pk(tenant), keys.workspace_sk(workspace_id), condition="attribute_exists(PK)")
        except ConditionFailed:
            raise NotFound(_WORKSPACE_NOT_FOUND, field="workspaceId") from None

    def exists_op(self, tenant: str, workspace_id: str) -> dict[str, object]:
        """A transaction's check that the workspace exists (an agent joining it)."""
        return self.table.check_op(keys.tenant_pk(tenant), keys.workspace_sk(workspace_id))


class AgentRepository:
    def __init__(self, table: Table):
        self.table = table
        self.workspaces = WorkspaceRepository(table)

    def _item(self, tenant: str, agent: Agent) -> dict[str, object]:
        return {
            "PK": keys.tenant_pk(tenant),
            "SK": keys.agent_sk(agent.id),
            "GSI2PK": keys.agent_lookup(agent.id),
            "GSI2SK": tenant,
            "tenant": tenant,
            **agent.model_dump(by_alias=True),
        }

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
        """The agent, `with_items` (its `dashboard` session), the workspace check and the quota
        claims (agents; scheduled agents when it has a schedule) commit together or not at all."""
        ops = [
            self.table.put_op(
                {**self._item(tenant, agent), "webhookSecret": webhook_secret}, condition="attribute_not_exists(PK)"
            )
        ]
        ops += [self.table.put_op(item) for item in with_items]
        if agent.workspace_id:
            ops.append(self.workspaces.exists_op(tenant, agent.workspace_id))
        claims = [quotas.agents(tenant, max_agents)]
        if agent.schedule:
            claims.append(quotas.scheduled_agents(tenant, max_scheduled))
        try:
            quotas.create_within(self.table, ops, *claims)
        except ConditionFailed as err:
            if agent.workspace_id and err.failed_at(len(ops) - 1):
                raise NotFound(_WORKSPACE_NOT_FOUND, field="workspaceId") from None
            raise

    def get(self, tenant: str, agent_id: str) -> Agent | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.agent_sk(agent_id))
        return Agent.model_validate(item) if item else None

    def webhook_credentials(self, agent_id: str) -> WebhookCredentials | None:
        """The webhook arrives without a principal: one GSI2 query maps an agent id to its tenant
        and its secrets (None for an unknown agent; the same one call either way)."""
        items, _ = self.table.query(keys.agent_lookup(agent_id), index="GSI2", limit=1)
        if not items or not items[0].get("webhookSecret"):
            return None
        item = items[0]
        return WebhookCredentials(
            tenant=str(item["GSI2SK"]),
            secret=str(item["webhookSecret"]),
            previous=str(item.get("previousWebhookSecret") or ""),
            previous_until=int(item.get("previousWebhookSecretUntil") or 0),
        )

    def rotate_webhook_secret(self, tenant: str, agent_id: str, secret: str, *, previous_until: int) -> None:
        # One UpdateItem: the right-hand sides read the item as it was, so the replaced secret is
        # the previous one whatever a concurrent rotation did (the later write wins whole).
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.agent_sk(agent_id),
                "SET previousWebhookSecret = webhookSecret, previousWebhookSecretUntil = :until, webhookSecret = :secret",
                condition="attribute_exists(PK)",
                values={":until": previous_until, ":secret": secret},
            )
        except ConditionFailed:
            raise NotFound("agent not found", field="agentId") from None

    def first_delivery(self, tenant: str, agent_id: str, digest: str, *, expires_at: int) -> bool:
        """Records a signed webhook request; False when it was seen before (a replay). One
        conditional write; the row expires (TTL) once its timestamp is out of the window."""
        try:
            self.table.put(
                {"PK": keys.agent_pk(tenant, agent_id), "SK": keys.webhook_delivery_sk(digest), "expiresAt": expires_at},
                condition="attribute_not_exists(PK)",
            )
        except ConditionFailed:
            return False
        return True

    def forget_delivery(self, tenant: str, agent_id: str, digest: str) -> None:
        """Removes the record of a signed webhook request whose turn was not queued."""
        self.table.delete(keys.agent_pk(tenant, agent_id), keys.webhook_delivery_sk(digest))

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[Agent], str | None]:
        items, nxt = self.table.query(keys.tenant_pk(tenant), sk_prefix="AGENT#", limit=limit, token=token)
        return [Agent.model_validate(i) for i in items], nxt

    def in_workspace(self, tenant: str, workspace_id: str) -> list[str]:
        items = self.table.query_all(keys.tenant_pk(tenant), sk_prefix="AGENT#", projection="id, workspaceId")
        return [i["id"] for i in items if i.get("workspaceId") == workspace_id]

    def update(
        self, tenant: str, agent_id: str, changes: dict[str, Any], *, scheduling: int = 0, max_scheduled: int = 0
    ) -> Agent:
        """`scheduling` +1 when the change gives the agent a schedule (a claim on the scheduled
        agents quota, `max_scheduled`), -1 when it takes it away (a release), in the same commit."""
        pk, sk = keys.tenant_pk(tenant), keys.agent_sk(agent_id)
        if not changes.get("workspaceId") and not scheduling:
            try:
                return Agent.model_validate(self.table.set_fields(pk, sk, changes))
            except ConditionFailed:
                raise NotFound("agent not found", field="agentId") from None
        expression, names, values = set_expression(changes)
        ops = [self.table.update_op(pk, sk, expression, condition="attribute_exists(PK)", names=names, values=values)]
        if changes.get("workspaceId"):  # the workspace must exist at the moment the agent moves into it
            ops.append(self.workspaces.exists_op(tenant, changes["workspaceId"]))
        try:
            if scheduling > 0:
                quotas.create_within(self.table, ops, quotas.scheduled_agents(tenant, max_scheduled))
            elif scheduling < 0:
                quotas.delete_releasing(self.table, quotas.scheduled_agents(tenant), ops)
            else:
                self.table.transact(ops)
        except ConditionFailed as err:
            if err.failed_at(0):
                raise NotFound("agent not found", field="agentId") from None
            raise NotFound(_WORKSPACE_NOT_FOUND, field="workspaceId") from None
        agent = self.get(tenant, agent_id)
        if agent is None:
            raise NotFound("agent not found", field="agentId")
        return agent

    def forget_quotas(self, tenant: str) -> None:
        """The account is gone: so are its agent counters."""
        quotas.forget(self.table, quotas.agents(tenant))
        quotas.forget(self.table, quotas.scheduled_agents(tenant))

    def delete_cascade(self, tenant: str, agent_id: str) -> list[str]:
        """Deletes the agent's runs, everything in its partition (sessions, memories, archive, run
        memory, markers) and, last, the agent row; returns the session ids. Children go first, so
        a retry after a partial failure finishes the job."""
        runs = self.table.query_all(keys.runs_by_agent(tenant, agent_id), index="GSI1", projection="PK, SK")
        children = self.table.query_all(keys.agent_pk(tenant, agent_id), projection="PK, SK")
        session_ids = [c["SK"].split("#", 1)[1] for c in children if c["SK"].startswith("SESSION#")]
        self.table.batch_write(deletes=[(r["PK"], r["SK"]) for r in runs] + [(c["PK"], c["SK"]) for c in children])
        row = self.table.get(keys.tenant_pk(tenant), keys.agent_sk(agent_id))
        try:
            delete = self.table.delete_op(keys.tenant_pk(tenant), keys.agent_sk(agent_id), condition="attribute_exists(PK)")
            quotas.delete_releasing(self.table, quotas.agents(tenant), [delete])
        except ConditionFailed:
            return session_ids  # another delete got there first, and gave back its room
        if row and row.get("schedule"):
            quotas.released(self.table, quotas.scheduled_agents(tenant), 1)
        return session_ids
