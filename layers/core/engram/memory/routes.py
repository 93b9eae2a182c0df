"""Long-term memory (agent and workspace scope), the caller's facts, export and account deletion."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, IncludeArchived, Limit, Reply, Token, deps_of, ok, tenant
from engram.kernel.ids import check_id
from engram.memory import service as memory_service
from engram.memory.models import MemoryCreate, MemoryUpdate, PinBody

router = Router()


def _create(scope: str, owner_id: str, body: MemoryCreate) -> Reply:
    # Upsert: fields the body leaves out keep their stored values (defaults apply to new rows).
    fields = body.model_dump(exclude={"key", "value", "source"}, exclude_unset=True)
    row, created = memory_service.upsert_memory(
        deps_of(router),
        tenant(router),
        scope=scope,
        owner_id=check_id(f"{scope}Id", owner_id),
        key=body.key,
        value=body.value,
        source="manual",
        fields=fields,
    )
    return ok(row.public(), 201 if created else 200)


def _list(scope: str, owner_id: str, include_archived: bool, limit: int, token: str | None) -> Reply:
    return ok(
        memory_service.list_memories(
            deps_of(router),
            tenant(router),
            scope,
            check_id(f"{scope}Id", owner_id),
            include_archived=include_archived,
            limit=limit,
            token=token,
        )
    )


# --- agent memory -------------------------------------------------------------------------------
@router.get("/api/agents/<agentId>/memories")
def list_agent_memories(
    agentId: str, includeArchived: IncludeArchived = False, limit: Limit = PAGE, nextToken: Token = None
) -> Reply:
    return _list("agent", agentId, includeArchived, limit, nextToken)


@router.post("/api/agents/<agentId>/memories")
def upsert_agent_memory(agentId: str, body: MemoryCreate) -> Reply:
    return _create("agent", agentId, body)


@router.patch("/api/agents/<agentId>/memories/<memoryId>")
def update_agent_memory(agentId: str, memoryId: str, body: MemoryUpdate) -> Reply:
    return ok(
        memory_service.update_memory(
            deps_of(router), tenant(router), "agent", check_id("agentId", agentId), memoryId, body
        ).public()
    )


@router.patch("/api/agents/<agentId>/memories/<memoryId>/pin")
def pin_agent_memory(agentId: str, memoryId: str, body: PinBody) -> Reply:
    return ok(
        memory_service.pin_memory(
            deps_of(router), tenant(router), "agent", check_id("agentId", agentId), memoryId, body.pinned
        ).public()
    )


@router.delete("/api/agents/<agentId>/memories/<memoryId>")
def delete_agent_memory(agentId: str, memoryId: str) -> Reply:
    memory_service.delete_memory(deps_of(router), tenant(router), "agent", check_id("agentId", agentId), memoryId)
    return ok({"id": memoryId, "deleted": True})


# --- workspace memory ---------------------------------------------------------------------------
@router.get("/api/workspaces/<workspaceId>/memories")
def list_workspace_memories(
    workspaceId: str, includeArchived: IncludeArchived = False, limit: Limit = PAGE, nextToken: Token = None
) -> Reply:
    return _list("workspace", workspaceId, includeArchived, limit, nextToken)


@router.post("/api/workspaces/<workspaceId>/memories")
def upsert_workspace_memory(workspaceId: str, body: MemoryCreate) -> Reply:
    return _create("workspace", workspaceId, body)


@router.patch("/api/workspaces/<workspaceId>/memories/<memoryId>")
def update_workspace_memory(workspaceId: str, memoryId: str, body: MemoryUpdate) -> Reply:
    return ok(
        memory_service.update_memory(
            deps_of(router), tenant(router), "workspace", check_id("workspaceId", workspaceId), memoryId, body
        ).public()
    )


@router.patch("/api/workspaces/<workspaceId>/memories/<memoryId>/pin")
def pin_workspace_memory(workspaceId: str, memoryId: str, body: PinBody) -> Reply:
    return ok(
        memory_service.pin_memory(
            deps_of(router), tenant(router), "workspace", check_id("workspaceId", workspaceId), memoryId, body.pinned
        ).public()
    )


@router.delete("/api/workspaces/<workspaceId>/memories/<memoryId>")
def delete_workspace_memory(workspaceId: str, memoryId: str) -> Reply:
    memory_service.delete_memory(deps_of(router), tenant(router), "workspace", check_id("workspaceId", workspaceId), memoryId)
    return ok({"id": memoryId, "deleted": True})


# --- the caller's facts and account -------------------------------------------------------------
