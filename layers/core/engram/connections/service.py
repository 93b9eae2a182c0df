"""Use cases of connections: create, read, change, delete (removing them from every agent), and
the checks an agent's `tools` field gets. Listing a server's tools (the test and refresh actions)
is in `probe`, served by the chat function: the api function never loads the MCP SDK."""

from __future__ import annotations

from engram.connections.egress import EgressPolicy
from engram.connections.models import Connection, ConnectionCreate, ConnectionUpdate, secret_context
from engram.kernel.errors import Conflict, NotFound
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import changes_of, now_iso, page
from engram.wiring.stores import Stores


def _policy(deps: Stores) -> EgressPolicy:
    return EgressPolicy.of(deps.settings.tool_egress, deps.settings.allow_private_tool_hosts)


def _check_name_free(deps: Stores, tenant: str, name: str, other_than: str | None = None) -> None:
    if deps.connections.name_taken(tenant, name, other_than=other_than):
        raise Conflict(
            f"a connection named {name!r} exists already; names are unique (they name its tools)", field="name", code="name_taken"
        )


def create_connection(deps: Stores, tenant: str, body: ConnectionCreate) -> Connection:
    _policy(deps).check_url(body.url)  # the scheme and a literal address; names are checked on connect
    _check_name_free(deps, tenant, body.name)
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
    )
    sealed = (
        deps.secret_box.seal(body.auth_header.value.get_secret_value(), secret_context(tenant, connection.id))
        if body.auth_header
        else None
    )
    deps.connections.create(tenant, connection, sealed, limit=deps.settings.max_connections)
    return connection


def get_connection(deps: Stores, tenant: str, connection_id: str) -> dict[str, object]:
    """The connection and the tools last discovered on it (if any)."""
    connection = deps.connections.get(tenant, check_id("connectionId", connection_id))
    if connection is None:
        raise NotFound("connection not found", field="connectionId")
    listed = deps.connections.tools(tenant, [connection.id]).get(connection.id)
    return {**connection.public(), "tools": listed.public() if listed else None}


def list_connections(deps: Stores, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    return page(*deps.connections.page(tenant, limit=limit, token=token))


def update_connection(deps: Stores, tenant: str, connection_id: str, body: ConnectionUpdate) -> Connection:
    changes = changes_of(body, nullable={"authHeader"})
    check_id("connectionId", connection_id)
    if deps.connections.get(tenant, connection_id) is None:
        raise NotFound("connection not found", field="connectionId")
    if "url" in changes:
        _policy(deps).check_url(changes["url"])
    if "url" in changes or "authHeader" in changes:
        changes["health"] = None  # another server or credential: what was known of the old one is void
    if "name" in changes:
        _check_name_free(deps, tenant, changes["name"], other_than=connection_id)
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


def delete_connection(deps: Stores, tenant: str, connection_id: str) -> dict[str, object]:
    """Deletes the connection, then takes it out of every agent that names it."""
    check_id("connectionId", connection_id)
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
    return {"id": connection_id, "deleted": True, "agentsChanged": changed}
