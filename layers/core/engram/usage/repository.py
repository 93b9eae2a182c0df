"""Usage rows: the tenant's usage partition, and per agent (GSI1) by session key and time."""

from __future__ import annotations

from typing import Any

from engram.aws import keys
from engram.aws.table import Table
from engram.usage.models import UsageRow


class UsageRepository:
    def __init__(self, table: Table):
        self.table = table

    def item(self, tenant: str, row: UsageRow) -> dict[str, Any]:
        return {
            "PK": keys.usage_pk(tenant),
            "SK": f"{row.created_at}#{row.id}",
            "GSI1PK": keys.usage_by_agent(tenant, row.agent_id),
            "GSI1SK": f"{row.session_key}#{row.created_at}#{row.id}",
            **row.model_dump(by_alias=True),
        }

    def put(self, tenant: str, row: UsageRow) -> None:
        self.table.put(self.item(tenant, row))

    def page(
        self, tenant: str, *, agent_id: str | None, session_key: str | None, limit: int, token: str | None
    ) -> tuple[list[UsageRow], str | None]:
        if agent_id:
            items, nxt = self.table.query(
                keys.usage_by_agent(tenant, agent_id),
                index="GSI1",
                sk_prefix=f"{session_key}#" if session_key else None,
                limit=limit,
                token=token,
                newest_first=not session_key,
            )
        else:
            items, nxt = self.table.query(keys.usage_pk(tenant), limit=limit, token=token, newest_first=True)
        return [UsageRow.model_validate(i) for i in items], nxt

    def all_rows(self, tenant: str) -> list[dict[str, object]]:
        """Every usage row of the tenant, as stored minus its keys (account export)."""
        rows = self.table.query_all(keys.usage_pk(tenant))
        return [{k: v for k, v in row.items() if not k.startswith(("PK", "SK", "GSI"))} for row in rows]

    def delete_all(self, tenant: str) -> int:
        return self.table.delete_all(keys.usage_pk(tenant))
