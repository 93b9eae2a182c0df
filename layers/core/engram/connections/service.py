"""Use cases of connections: create, read, change, delete (removing them from every agent), and
the checks an agent's `tools` field gets. Listing a server's tools (the test and refresh actions)
is in `probe`, served by the chat function: the api function never loads the MCP SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engram.connections import oauth
from engram.connections.egress import EgressPolicy
from engram.connections.models import Connection, ConnectionCreate, ConnectionUpdate, OAuthStatus, secret_context
from engram.kernel.errors import BadRequest, Conflict, NotFound
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import changes_of, now_iso, page

if TYPE_CHECKING:
    from engram.agents.ports import Agents
    from engram.connections.ports import Connections
    from engram.kernel.settings import Settings


class ConnectionStores(oauth.OAuthDeps, Protocol):
    """Deleting a connection: its OAuth grant revoked (oauth.OAuthDeps), then taken out of every
    agent that names it (wiring.Stores is one)."""

    @property
    def agents(self) -> Agents: ...


def _policy(settings: Settings) -> EgressPolicy:
    return EgressPolicy.of(settings.tool_egress, settings.allow_private_tool_hosts)


def _check_name_free(connections: Connections, tenant: str, name: str, other_than: str | None = None) -> None:
    if connections.name_taken(tenant, name, other_than=other_than):
        raise Conflict(
            f"a connection named {name!r} exists already; names are unique (they name its tools)", field="name", code="name_taken"
        )


def create_connection(deps: oauth.OAuthDeps, tenant: str, body: ConnectionCreate) -> Connection:
    _policy(deps.settings).check_url(body.url)  # the scheme and a literal address; names are checked on connect
    _check_name_free(deps.connections, tenant, body.name)
    now = now_iso()
    connection = Connection(
        id=new_id("conn"),
        created_at=now,
        updated_at=now,
        name=body.name,
        url=body.url,
        description=body.description,
        auth_header_name=body.auth_header.name if body.auth_header else None,
        has_auth=body.auth_header is not None,
        timeout_seconds=body.timeout_seconds,
        oauth=OAuthStatus(client_id=body.oauth.client_id, reason="not_authorized") if body.oauth else None,
    )
    sealed = (
        deps.secret_box.seal(body.auth_header.value.get_secret_value(), secret_context(tenant, connection.id))
        if body.auth_header
        else None
    )
    extra: dict[str, object] = {}
    if body.oauth:  # the client given with it (TL9), its secret sealed like an auth header
        secret = body.oauth.client_secret
        extra = {
            "oauthClientId": body.oauth.client_id,
            "oauthScope": body.oauth.scope,
            "sealedOAuthClient": oauth.seal_client_secret(deps, tenant, connection.id, secret.get_secret_value())
            if secret
            else None,
        }
    deps.connections.create(tenant, connection, sealed, limit=deps.settings.max_connections, extra=extra)
    return connection


def get_connection(deps: oauth.OAuthDeps, tenant: str, connection_id: str) -> dict[str, object]:
    """The connection and the tools last discovered on it (if any)."""
    connection = deps.connections.get(tenant, check_id("connectionId", connection_id))
    if connection is None:
        raise NotFound("connection not found", field="connectionId")
    listed = deps.connections.tools(tenant, [connection.id]).get(connection.id)
    out = {**connection.public(), "tools": listed.public() if listed else None}
    if connection.oauth is not None:
        out["authorization"] = oauth.pending(deps, tenant, connection)
    return out


def list_connections(connections: Connections, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    return page(*connections.page(tenant, limit=limit, token=token))


def update_connection(deps: oauth.OAuthDeps, tenant: str, connection_id: str, body: ConnectionUpdate) -> Connection:
    changes = changes_of(body, nullable={"authHeader"})
    check_id("connectionId", connection_id)
    existing = deps.connections.get(tenant, connection_id)
    if existing is None:
        raise NotFound("connection not found", field="connectionId")
    if existing.oauth is not None and "authHeader" in changes:
        raise BadRequest(
            "this connection authorises with OAuth; it takes no authHeader", field="authHeader", code="not_header_auth"
        )
    if "url" in changes:
        _policy(deps.settings).check_url(changes["url"])
        if existing.oauth is not None and changes["url"] != existing.url:  # another server: its grant goes
            _forget_grant(deps, tenant, connection_id, changes)
    if "url" in changes or "authHeader" in changes:
        changes["health"] = None  # another server or credential: what was known of the old one is void
    if "name" in changes:
        _check_name_free(deps.connections, tenant, changes["name"], other_than=connection_id)
    if "authHeader" in changes:
        header = body.auth_header
        changes.pop("authHeader")
        changes["authHeaderName"] = header.name if header else None
        changes["hasAuth"] = header is not None
        changes["sealedAuth"] = (
            deps.secret_box.seal(header.value.get_secret_value(), secret_context(tenant, connection_id)) if header else None
        )
    changes["updatedAt"] = now_iso()
    return deps.connections.update(tenant, connection_id, changes)


def _forget_grant(deps: oauth.OAuthDeps, tenant: str, connection_id: str, changes: dict[str, object]) -> None:
    row = deps.connections.oauth_row(tenant, connection_id)
    if row is not None:
        oauth.revoke(deps, tenant, row)
        status = (row.connection.oauth or OAuthStatus()).model_copy(
            update={
                "status": "needs_authorization",
                "reason": "url_changed",
                "issuer": None,
                "scope": None,
                "authorized_at": None,
            }
        )
        changes.update(sealedAuth=None, oauthServer=None, oauth=status.model_dump(by_alias=True))


def delete_connection(deps: ConnectionStores, tenant: str, connection_id: str) -> dict[str, object]:
    """Deletes the connection (revoking an OAuth grant first, where the server offers it), then
    takes it out of every agent that names it."""
    check_id("connectionId", connection_id)
    row = deps.connections.oauth_row(tenant, connection_id)
    revoked = oauth.revoke(deps, tenant, row) if row is not None and row.connection.oauth is not None else None
    deps.connections.delete(tenant, connection_id)
    changed = 0
    token: str | None = None
    while True:
        agents, token = deps.agents.page(tenant, limit=100, token=token)
        for agent in agents:
            kept = [grant for grant in agent.tools if grant.connection_id != connection_id]
            if len(kept) != len(agent.tools):
                grants = [grant.model_dump(by_alias=True) for grant in kept]
                try:
                    deps.agents.update(tenant, agent.id, {"tools": grants, "updatedAt": now_iso()})
                    changed += 1
                except NotFound:
                    pass  # deleted meanwhile
        if not token:
            break
    out: dict[str, object] = {"id": connection_id, "deleted": True, "agentsChanged": changed}
    if revoked is not None:
        out["grantRevoked"] = revoked
    return out


def revoke_all(deps: oauth.OAuthDeps, tenant: str) -> int:
    """Revokes every OAuth grant of the tenant (its account is being deleted); how many the
    servers took. Best effort: a server that does not answer does not stop the deletion."""
    revoked = 0
    for connection in deps.connections.all(tenant):
        if connection.oauth is None:
            continue
        row = deps.connections.oauth_row(tenant, connection.id)
        if row is not None and oauth.revoke(deps, tenant, row):
            revoked += 1
    return revoked
