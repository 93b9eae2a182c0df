"""Long-term memory (agent and workspace scope), the caller's facts, export and account deletion."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, IncludeArchived, Limit, Reply, Token, deps_of, ok, tenant_of
from engram.kernel.ids import check_id
from engram.memory import service as memory_service
from engram.memory.models import MemoryCreate, MemoryUpdate, PinBody

router = Router()


# --- agent and workspace memory: one set of routes, registered for each scope ---------------------
# The handlers below take the scope and the owner's id; `_for_scope` makes each the route of one
# scope, its first parameter named after the path's id (agentId, workspaceId), as powertools and
# the OpenAPI checks read a handler's signature.
def _list(
    scope: str, owner_id: str, includeArchived: IncludeArchived = False, limit: Limit = PAGE, nextToken: Token = None
) -> Reply:
    return ok(
        memory_service.list_memories(
            deps_of(router), tenant_of(router), scope, owner_id, include_archived=includeArchived, limit=limit, token=nextToken
        )
    )


def _upsert(scope: str, owner_id: str, body: MemoryCreate) -> Reply:
    # Upsert: fields the body leaves out keep their stored values (defaults apply to new rows).
    fields = body.model_dump(exclude={"key", "value", "source"}, exclude_unset=True)
    row, created = memory_service.upsert_memory(
        deps_of(router),
        tenant_of(router),
        scope=scope,
        owner_id=owner_id,
        key=body.key,
        value=body.value,
        source="manual",
        fields=fields,
    )
    return ok(row.public(), 201 if created else 200)


def _update(scope: str, owner_id: str, memoryId: str, body: MemoryUpdate) -> Reply:
    return ok(memory_service.update_memory(deps_of(router), tenant_of(router), scope, owner_id, memoryId, body).public())


def _pin(scope: str, owner_id: str, memoryId: str, body: PinBody) -> Reply:
    return ok(memory_service.pin_memory(deps_of(router), tenant_of(router), scope, owner_id, memoryId, body.pinned).public())


def _delete(scope: str, owner_id: str, memoryId: str) -> Reply:
    memory_service.delete_memory(deps_of(router), tenant_of(router), scope, owner_id, memoryId)
    return ok({"id": memoryId, "deleted": True})


def _for_scope(scope: str, name: str, handler: Callable[..., Reply]) -> Callable[..., Reply]:
    """``handler`` as the route function ``name`` of one scope: ``(<scope>Id, *the rest)``, the id checked."""
    id_name = f"{scope}Id"
    hints = typing.get_type_hints(handler, include_extras=True)
    rest = list(inspect.signature(handler).parameters.values())[2:]
    params = [inspect.Parameter(id_name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
    params += [p.replace(annotation=hints[p.name]) for p in rest]

    def route(**kwargs: Any) -> Reply:
        owner_id = check_id(id_name, kwargs.pop(id_name))
        return handler(scope, owner_id, **kwargs)

    route.__name__ = route.__qualname__ = name
    route.__wrapped__ = handler  # type: ignore[attr-defined]  # its source is the handler's (inspect.getsource)
    route.__signature__ = inspect.Signature(params, return_annotation=Reply)  # type: ignore[attr-defined]
    route.__annotations__ = {p.name: p.annotation for p in params} | {"return": Reply}
    return route


for _scope, _owners in (("agent", "agents/<agentId>"), ("workspace", "workspaces/<workspaceId>")):
    _base = f"/api/{_owners}/memories"
    router.get(_base)(_for_scope(_scope, f"list_{_scope}_memories", _list))
    router.post(_base)(_for_scope(_scope, f"upsert_{_scope}_memory", _upsert))
    router.patch(f"{_base}/<memoryId>")(_for_scope(_scope, f"update_{_scope}_memory", _update))
    router.patch(f"{_base}/<memoryId>/pin")(_for_scope(_scope, f"pin_{_scope}_memory", _pin))
    router.delete(f"{_base}/<memoryId>")(_for_scope(_scope, f"delete_{_scope}_memory", _delete))


# --- the caller's facts and account -------------------------------------------------------------
