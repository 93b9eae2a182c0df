"""Long-term memory (agent and workspace scope), the caller's facts, export and account deletion."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, get_args

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import PAGE, Deps, IncludeArchived, Limit, Reply, SearchText, Tenant, Token, listed, ok
from engram.kernel.ids import check_id
from engram.memory import service as memory_service
from engram.memory.models import MemoryCreate, MemorySource, MemoryUpdate, OwnerScope, PinBody

if TYPE_CHECKING:
    from engram.memory.ports import MemoryStores

router = Router()

_SOURCE = "|".join(get_args(MemorySource))
# `source=manual,chat`: the rows of any of these sources.
SourceFilter = Annotated[str | None, Query(pattern=rf"^({_SOURCE})(,({_SOURCE}))*$", max_length=200)]


# --- agent and workspace memory: the same routes for each scope, written out ---------------------
# Each route checks its owner's id and calls the scope's handler below.
def _list(
    deps: MemoryStores,
    tenant: str,
    scope: OwnerScope,
    owner_id: str,
    include_archived: bool,
    limit: int,
    token: str | None,
    q: str | None,
    source: str | None,
) -> Reply:
    return ok(
        memory_service.list_memories(
            deps.agents,
            deps.workspaces,
            deps.memories,
            tenant,
            scope,
            owner_id,
            include_archived=include_archived,
            limit=limit,
            token=token,
            q=q,
            sources=listed(source),
        )
    )


def _upsert(deps: MemoryStores, tenant: str, scope: OwnerScope, owner_id: str, body: MemoryCreate) -> Reply:
    # Upsert: fields the body leaves out keep their stored values (defaults apply to new rows).
    fields = body.model_dump(exclude={"key", "value", "source"}, exclude_unset=True)
    row, created = memory_service.upsert_memory(
        deps,
        tenant,
        scope=scope,
        owner_id=owner_id,
        key=body.key,
        value=body.value,
        source="manual",
        fields=fields,
    )
    return ok(row.public(), 201 if created else 200)


def _update(deps: MemoryStores, tenant: str, scope: OwnerScope, owner_id: str, memory_id: str, body: MemoryUpdate) -> Reply:
    return ok(memory_service.update_memory(deps, tenant, scope, owner_id, memory_id, body).public())


def _pin(deps: MemoryStores, tenant: str, scope: OwnerScope, owner_id: str, memory_id: str, body: PinBody) -> Reply:
    return ok(
        memory_service.pin_memory(
            deps.agents, deps.workspaces, deps.memories, tenant, scope, owner_id, memory_id, body.pinned
        ).public()
    )


def _delete(deps: MemoryStores, tenant: str, scope: OwnerScope, owner_id: str, memory_id: str) -> Reply:
    memory_service.delete_memory(deps.agents, deps.workspaces, deps.memories, tenant, scope, owner_id, memory_id)
    return ok({"id": memory_id, "deleted": True})


@router.get("/api/agents/<agentId>/memories")
def list_agent_memories(
    deps: Deps,
    tenant: Tenant,
    agentId: str,
    includeArchived: IncludeArchived = False,
    limit: Limit = PAGE,
    nextToken: Token = None,
    q: SearchText = None,
    source: SourceFilter = None,
) -> Reply:
    return _list(deps, tenant, "agent", check_id("agentId", agentId), includeArchived, limit, nextToken, q, source)


@router.post("/api/agents/<agentId>/memories")
def upsert_agent_memory(deps: Deps, tenant: Tenant, agentId: str, body: MemoryCreate) -> Reply:
    return _upsert(deps, tenant, "agent", check_id("agentId", agentId), body)


@router.patch("/api/agents/<agentId>/memories/<memoryId>")
def update_agent_memory(deps: Deps, tenant: Tenant, agentId: str, memoryId: str, body: MemoryUpdate) -> Reply:
    return _update(deps, tenant, "agent", check_id("agentId", agentId), memoryId, body)


@router.patch("/api/agents/<agentId>/memories/<memoryId>/pin")
def pin_agent_memory(deps: Deps, tenant: Tenant, agentId: str, memoryId: str, body: PinBody) -> Reply:
    return _pin(deps, tenant, "agent", check_id("agentId", agentId), memoryId, body)


@router.delete("/api/agents/<agentId>/memories/<memoryId>")
def delete_agent_memory(deps: Deps, tenant: Tenant, agentId: str, memoryId: str) -> Reply:
    return _delete(deps, tenant, "agent", check_id("agentId", agentId), memoryId)


@router.get("/api/workspaces/<workspaceId>/memories")
def list_workspace_memories(
    deps: Deps,
    tenant: Tenant,
    workspaceId: str,
    includeArchived: IncludeArchived = False,
    limit: Limit = PAGE,
    nextToken: Token = None,
    q: SearchText = None,
    source: SourceFilter = None,
) -> Reply:
    return _list(deps, tenant, "workspace", check_id("workspaceId", workspaceId), includeArchived, limit, nextToken, q, source)


@router.post("/api/workspaces/<workspaceId>/memories")
def upsert_workspace_memory(deps: Deps, tenant: Tenant, workspaceId: str, body: MemoryCreate) -> Reply:
    return _upsert(deps, tenant, "workspace", check_id("workspaceId", workspaceId), body)


@router.patch("/api/workspaces/<workspaceId>/memories/<memoryId>")
def update_workspace_memory(deps: Deps, tenant: Tenant, workspaceId: str, memoryId: str, body: MemoryUpdate) -> Reply:
    return _update(deps, tenant, "workspace", check_id("workspaceId", workspaceId), memoryId, body)


@router.patch("/api/workspaces/<workspaceId>/memories/<memoryId>/pin")
def pin_workspace_memory(deps: Deps, tenant: Tenant, workspaceId: str, memoryId: str, body: PinBody) -> Reply:
    return _pin(deps, tenant, "workspace", check_id("workspaceId", workspaceId), memoryId, body)


@router.delete("/api/workspaces/<workspaceId>/memories/<memoryId>")
def delete_workspace_memory(deps: Deps, tenant: Tenant, workspaceId: str, memoryId: str) -> Reply:
    return _delete(deps, tenant, "workspace", check_id("workspaceId", workspaceId), memoryId)


# --- the caller's facts and account -------------------------------------------------------------
