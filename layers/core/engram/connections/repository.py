"""Connection rows and their cached tool lists, in the tenant partition.

PK <t>  SK CONN#<id>       the connection; `sealedAuth` is the auth value sealed with KMS;
                           `health` what turns last met on its server (TL8), written by a
                           conditional update on the failure count the writer read
PK <t>  SK CONN#<id>       of an OAuth connection also (TL9): `sealedAuth` the sealed grant,
                           `oauthServer` the discovered server and client (JSON), `oauthClientId`
                           and `sealedOAuthClient` the client given with it, `oauthScope`,
                           `oauthRefreshUntil` the lease of the one function refreshing it
PK OAUTHSTATE#<sha256 of state> SK STATE   an authorization in flight: tenant, connection, PKCE
                           verifier; taken once by the callback, `expiresAt` TTL
PK <t>  SK CONNTOOLS#<id>  its discovered tools as JSON text (schemas keep their own number
                           types: DynamoDB would turn them into Decimals), fresh until
                           `freshUntil`, kept a week longer (`expiresAt` TTL) so a server that
                           went down still has its tools shown as unavailable
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.connections.models import Connection, DiscoveredTool, Health, OAuthRow, ToolList
from engram.kernel.errors import NotFound
from engram.kernel.model import now_iso

_NOT_FOUND = "connection not found"

_SEALED = "sealedAuth"
_KEEP_STALE_S = 7 * 86_400  # a cached tool list outlives its freshness by this much
_LEASE = "oauthRefreshUntil"  # epoch seconds: one function refreshes an OAuth grant at a time


class ConnectionRepository:
    def __init__(self, table: Table):
        self.table = table

    def _item(
        self, tenant: str, connection: Connection, sealed_auth: str | None, extra: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        item = {
            "PK": keys.tenant_pk(tenant),
            "SK": keys.connection_sk(connection.id),
            **connection.model_dump(by_alias=True, exclude={"health"}),
        }
        item.update({k: v for k, v in (extra or {}).items() if v is not None})
        if sealed_auth:
            item[_SEALED] = sealed_auth
        return item

    @staticmethod
    def _parse(item: dict[str, Any]) -> tuple[Connection, str | None]:
        return Connection.model_validate(item), item.get(_SEALED)

    def create(
        self,
        tenant: str,
        connection: Connection,
        sealed_auth: str | None,
        *,
        limit: int,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        """`extra`: attributes of the row that are not the public resource (an OAuth client's)."""
        quotas.create_within(
            self.table,
            [self.table.put_op(self._item(tenant, connection, sealed_auth, extra), condition="attribute_not_exists(PK)")],
            quotas.connections(tenant, limit),
        )

    def get(self, tenant: str, connection_id: str) -> Connection | None:
        found = self.get_with_secret(tenant, connection_id)
        return found[0] if found else None

    def get_with_secret(self, tenant: str, connection_id: str) -> tuple[Connection, str | None] | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.connection_sk(connection_id))
        return self._parse(item) if item else None

    def get_many_with_secrets(self, tenant: str, connection_ids: list[str]) -> dict[str, tuple[Connection, str | None]]:
        pairs = [(keys.tenant_pk(tenant), keys.connection_sk(c)) for c in dict.fromkeys(connection_ids)]
        found = [self._parse(item) for item in self.table.get_many(pairs)]
        return {connection.id: (connection, sealed) for connection, sealed in found}

    def page(self, tenant: str, *, limit: int, token: str | None) -> tuple[list[Connection], str | None]:
        items, nxt = self.table.query(keys.tenant_pk(tenant), sk_prefix="CONN#", limit=limit, token=token)
        return [Connection.model_validate(i) for i in items], nxt

    def all(self, tenant: str) -> list[Connection]:
        return [Connection.model_validate(i) for i in self.table.query_all(keys.tenant_pk(tenant), sk_prefix="CONN#")]

    def name_taken(self, tenant: str, name: str, *, other_than: str | None = None) -> bool:
        return any(c.name == name and c.id != other_than for c in self.all(tenant))

    def update(self, tenant: str, connection_id: str, changes: Mapping[str, object]) -> Connection:
        """`changes` in the row's attribute names; `sealedAuth` None removes the stored value."""
        try:
            item = self.table.set_fields(keys.tenant_pk(tenant), keys.connection_sk(connection_id), changes)
        except ConditionFailed:
            raise NotFound(_NOT_FOUND, field="connectionId") from None
        return Connection.model_validate(item)

    def record_health(self, tenant: str, connection_id: str, health: Health, *, seen: int) -> bool:
        """Writes the server's health if its failure count is still `seen` (what the writer read):
        one conditional UpdateItem, no read. False when another turn changed it first (its word
        stands) or the connection is gone."""
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.connection_sk(connection_id),
                "SET #h = :h",
                condition="attribute_exists(PK) AND (attribute_not_exists(#h) OR #h.#f = :seen)",
                names={"#h": "health", "#f": "consecutiveFailures"},
                values={":h": health.stored(), ":seen": seen},
                returns="NONE",
            )
        except ConditionFailed:
            return False
        return True

    def delete(self, tenant: str, connection_id: str) -> None:
        pk = keys.tenant_pk(tenant)
        try:
            quotas.delete_releasing(
                self.table,
                quotas.connections(tenant),
                [self.table.delete_op(pk, keys.connection_sk(connection_id), condition="attribute_exists(PK)")],
            )
        except ConditionFailed:
            raise NotFound(_NOT_FOUND, field="connectionId") from None
        self.table.delete(pk, keys.connection_tools_sk(connection_id))

    def delete_all(self, tenant: str) -> int:
        pk = keys.tenant_pk(tenant)
        deleted = self.table.delete_all(pk, sk_prefix="CONN#")
        self.table.delete_all(pk, sk_prefix="CONNTOOLS#")
        quotas.forget(self.table, quotas.connections(tenant))
        return deleted

    # --- OAuth (TL9) ---------------------------------------------------------------------------
    def oauth_row(self, tenant: str, connection_id: str) -> OAuthRow | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.connection_sk(connection_id))
        if item is None:
            return None
        return OAuthRow(
            connection=Connection.model_validate(item),
            sealed_tokens=item.get(_SEALED),
            server=item.get("oauthServer"),
            preregistered_client_id=item.get("oauthClientId"),
            requested_scope=item.get("oauthScope"),
            sealed_client_secret=item.get("sealedOAuthClient"),
        )

    def replace_tokens(
        self, tenant: str, connection_id: str, *, expected: str | None, sealed: str | None, oauth: dict[str, object]
    ) -> bool:
        """Sets the sealed grant (None removes it) and the public status, if the row still holds
        `expected` (two functions refreshing at once: the second keeps the first's tokens)."""
        names = {"#s": _SEALED, "#o": "oauth", "#u": "updatedAt", "#l": _LEASE}
        values: dict[str, object] = {":o": oauth, ":u": now_iso()}
        expression = "SET #o = :o, #u = :u"
        expression += ", #s = :n REMOVE #l" if sealed else " REMOVE #s, #l"
        if sealed:
            values[":n"] = sealed
        if expected is None:
            condition = "attribute_exists(PK) AND attribute_not_exists(#s)"
        else:
            condition = "attribute_exists(PK) AND #s = :e"
            values[":e"] = expected
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.connection_sk(connection_id),
                expression,
                condition=condition,
                names=names,
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def claim_refresh(self, tenant: str, connection_id: str, *, until: int, now: int) -> bool:
        """Takes the connection's refresh lease (none held, or held past its time)."""
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.connection_sk(connection_id),
                "SET #l = :until",
                condition="attribute_exists(PK) AND (attribute_not_exists(#l) OR #l < :now)",
                names={"#l": _LEASE},
                values={":until": until, ":now": now},
                returns="NONE",
            )
        except ConditionFailed:
            return False
        return True

    def release_refresh(self, tenant: str, connection_id: str) -> None:
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.connection_sk(connection_id),
                "REMOVE #l",
                condition="attribute_exists(PK)",
                names={"#l": _LEASE},
                returns="NONE",
            )
        except ConditionFailed:
            pass  # the connection was deleted meanwhile

    # --- the cached tool lists ------------------------------------------------------------------
    def tools(self, tenant: str, connection_ids: list[str]) -> dict[str, ToolList]:
        pairs = [(keys.tenant_pk(tenant), keys.connection_tools_sk(c)) for c in dict.fromkeys(connection_ids)]
        out: dict[str, ToolList] = {}
        for item in self.table.get_many(pairs):
            connection_id = str(item["SK"]).removeprefix("CONNTOOLS#")
            out[connection_id] = ToolList(
                tools=[DiscoveredTool.model_validate(tool) for tool in json.loads(item["tools"])],
                listed_at=item["listedAt"],
                expires_at=int(item.get("freshUntil", item["expiresAt"])),
            )
        return out

    def put_tools(self, tenant: str, connection_id: str, tools: ToolList) -> None:
        text = json.dumps([tool.model_dump() for tool in tools.tools], ensure_ascii=False, separators=(",", ":"))
        self.table.put(
            {
                "PK": keys.tenant_pk(tenant),
                "SK": keys.connection_tools_sk(connection_id),
                "tools": text,
                "listedAt": tools.listed_at,
                "freshUntil": tools.expires_at,
                "expiresAt": tools.expires_at + _KEEP_STALE_S,
            }
        )


class OAuthStateRepository:
    """Authorizations in flight (TL9): `OAUTHSTATE#<sha256 of state>`, outside any tenant's partition
    because the public callback knows only the state; the row names the tenant, and is taken once."""

    def __init__(self, table: Table):
        self.table = table

    def put(self, state_hash: str, record: dict[str, object], *, expires_at: int) -> None:
        self.table.put({"PK": keys.oauth_state_pk(state_hash), "SK": "STATE", **record, "expiresAt": expires_at})

    def take(self, state_hash: str) -> dict[str, object] | None:
        """The state's record, deleted as it is read: a second callback with it finds nothing."""
        try:
            return self.table.delete(keys.oauth_state_pk(state_hash), "STATE", condition="attribute_exists(PK)", returning=True)
        except ConditionFailed:
            return None
