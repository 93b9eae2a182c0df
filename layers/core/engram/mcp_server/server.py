"""The MCP server at POST /mcp (MX1): the official SDK's `MCPServer`, served statelessly with JSON
responses, one request per Lambda invocation.

The SDK's Streamable HTTP transport is an ASGI entry (its session manager's `handle_request`)
whose manager runs a task group: a container keeps one event loop on the thread that serves its
requests, each server's manager running on it, and feeds it each request as one ASGI call
(`_serve`; a loop and a manager per request where that loop is busy). So the SDK does
all of the protocol (both eras: the handshake-era `initialize` + requests, and 2026-07-28's
self-contained requests), tool schemas from the signatures and argument validation; Engram
supplies the tools, which call the same services as the REST routes (validation, quotas, the
secret detector, paging) for the caller the authorizer let in. Imported only by the /mcp route:
the SDK (and starlette) never load for the other routes of the api function.

Read-only keys get a server without the write tools: they neither list nor call them.

Every tool carries a title and annotations (read tools read-only; the forget tools destructive
and idempotent; store_memory idempotent, by key). Unknown arguments are refused, and a tool's
failure, arguments included, is the REST error `{code, message, field}` as the result's text.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from engram import __version__
from engram.agents import service as agents
from engram.api.http import Principal
from engram.cards import service as cards
from engram.facts import service as facts
from engram.facts.models import FactCreate
from engram.kernel.aio import run_sync
from engram.kernel.errors import BadRequest, EngramError, Forbidden, error_body, invalid_input
from engram.kernel.settings import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from engram.memory import service as memory
from engram.memory.models import MemoryCreate, OwnerScope
from engram.recall import service as recall
from engram.wiring.stores import Stores

Limit = Annotated[int, Field(ge=1, le=LIST_LIMIT_MAX, description="Items per page.")]
NextToken = Annotated[str | None, Field(max_length=2048, description="The nextToken of the previous page.")]
OwnerId = Annotated[str, Field(description="The agent's id (scope agent) or the workspace's id (scope workspace).")]

# The SDK logs each request's session manager starting and stopping, and each request, at INFO:
# per invocation that is noise (and time); Engram's own logs name the request.
logging.getLogger("mcp.server").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Caller:
    deps: Stores
    who: Principal

    @property
    def tenant(self) -> str:
        return self.who.tenant


_CALLER: ContextVar[Caller] = ContextVar("engram_mcp_caller")


def _caller(*, writes: bool = False) -> Caller:
    caller = _CALLER.get()
    if writes and not caller.who.may_write():  # the read-only server has no write tools; this is the backstop
        raise _tool_error(Forbidden("this API key is read-only; this tool writes", code="insufficient_scope"))
    return caller


def _tool_error(err: EngramError) -> ToolError:
    """The error as a tool error whose text is the REST error's body (`kernel.errors.error_body`)."""
    return ToolError(json.dumps(error_body(err), ensure_ascii=False))


def _checked[T](call: Callable[[], T]) -> T:
    """A service call, its errors as the tool's error result (the REST error's body)."""
    try:
        return call()
    except EngramError as err:
        raise _tool_error(err) from None
    except ValidationError as err:
        raise _tool_error(invalid_input(err.errors())) from None


def _tool[F: Callable[..., Awaitable[object]]](
    server: MCPServer, title: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False
) -> Callable[[F], F]:
    """Registers a tool with its title and annotations: it only reads, or what its writes do;
    never the open world (the caller's own Engram data)."""
    hints = ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=None if read_only else destructive,
        idempotent_hint=True if read_only else idempotent,
        open_world_hint=False,
    )
    return server.tool(title=title, annotations=hints)


def _register_read_tools(server: MCPServer) -> None:
    @_tool(server, "List agents", read_only=True)
    async def list_agents(limit: Limit = LIST_LIMIT_DEFAULT, nextToken: NextToken = None) -> dict[str, Any]:
        """Your agents (id, name, persona, workspaceId, ...), a page at a time."""
        c = _caller()
        return _checked(lambda: agents.list_agents(c.deps.agents, c.tenant, limit, nextToken))

    @_tool(server, "Search conversations", read_only=True)
    async def search_memory(
        agentId: Annotated[str, Field(description="The agent whose conversations to search.")],
        query: Annotated[str, Field(description="The words to look for.")],
        limit: Limit = 20,
        nextToken: NextToken = None,
    ) -> dict[str, Any]:
        """Search everything said with an agent (all its sessions, what the history cap cut too), best first."""
        c = _caller()
        return _checked(
            lambda: recall.search_archive(c.deps.agents, c.deps.archive, c.tenant, agentId, query, limit=limit, token=nextToken)
        )

    @_tool(server, "List facts about you", read_only=True)
    async def list_facts(
        includeArchived: bool = False,
        limit: Limit = LIST_LIMIT_DEFAULT,
        nextToken: NextToken = None,
    ) -> dict[str, Any]:
        """What Engram knows about you (your facts), active ones first."""
        c = _caller()
        return _checked(
            lambda: facts.list_facts(c.deps.facts, c.tenant, include_archived=includeArchived, limit=limit, token=nextToken)
        )

    @_tool(server, "Recall memories", read_only=True)
    async def recall_memory(
        scope: OwnerScope,
        ownerId: OwnerId,
        query: Annotated[str, Field(max_length=500, description="Words to look for; empty: the list in order.")] = "",
        limit: Limit = LIST_LIMIT_DEFAULT,
        nextToken: NextToken = None,
    ) -> dict[str, Any]:
        """An agent's or a workspace's long-term memories: matching `query`, or a page of all of them."""
        c = _caller()

        def run() -> dict[str, object]:
            if not query.strip():
                return memory.list_memories(
                    c.deps.agents, c.deps.workspaces, c.deps.memories, c.tenant, scope, ownerId, limit=limit, token=nextToken
                )
            # The owner is looked up first: an unknown or another user's id is a 404, as over REST.
            if scope == "agent":
                agent_id, workspace_id = agents.get_agent(c.deps.agents, c.tenant, ownerId).id, None
            else:
                agent_id, workspace_id = "", agents.get_workspace(c.deps.workspaces, c.tenant, ownerId).id
            hits = memory.recall(
                c.deps.memories,
                c.deps.facts,
                c.tenant,
                agent_id=agent_id,
                workspace_id=workspace_id,
                session_id="",
                query=query,
                scopes=[scope],
                limit=limit,
            )
            return {"items": hits, "nextToken": None}

        return _checked(run)

    @_tool(server, "Get an agent's decisions", read_only=True)
    async def get_decisions(
        agentId: str,
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
        nextToken: NextToken = None,
    ) -> dict[str, Any]:
        """An agent's decisions (its result cards), newest first."""
        c = _caller()
        return _checked(
            lambda: cards.list_decisions(
                c.deps.agents, c.deps.card_types, c.deps.run_decisions, c.tenant, agentId, limit, nextToken
            )
        )


def _register_write_tools(server: MCPServer) -> None:
    @_tool(server, "Remember a fact about you")
    async def remember(
        fact: Annotated[str, Field(description="One thing about you, in a sentence.")],
        topic: str | None = None,
        confidence: Literal["asserted", "inferred"] = "asserted",
    ) -> dict[str, Any]:
        """Tell Engram a fact about you (refused if it looks like a secret)."""
        c = _caller(writes=True)

        def run() -> dict[str, object]:
            body = FactCreate.model_validate({"fact": fact, "topic": topic, "confidence": confidence})
            row, created = facts.add_fact(
                c.deps.facts, c.deps.settings, c.tenant, body.fact, source="profile", confidence=body.confidence, topic=body.topic
            )
            return {**row.public(), "created": created}

        return _checked(run)

    @_tool(server, "Forget a fact", destructive=True, idempotent=True)
    async def forget(factId: str) -> dict[str, Any]:
        """Forget one of your facts (archived, as the console's delete does)."""
        c = _caller(writes=True)
        return _checked(lambda: facts.archive_fact(c.deps.facts, c.tenant, factId, "user_deleted").public())

    @_tool(server, "Store a memory", idempotent=True)
    async def store_memory(
        scope: OwnerScope,
        ownerId: OwnerId,
        key: str,
        value: str,
        importance: Annotated[int, Field(ge=0, le=100)] = 0,
        pinned: bool = False,
    ) -> dict[str, Any]:
        """Store (or update, by key) a long-term memory of an agent or a workspace."""
        c = _caller(writes=True)

        def run() -> dict[str, object]:
            body = MemoryCreate.model_validate({"key": key, "value": value, "importance": importance, "pinned": pinned})
            fields = body.model_dump(exclude={"key", "value", "source"}, exclude_unset=True)
            row, created = memory.upsert_memory(
                c.deps, c.tenant, scope=scope, owner_id=ownerId, key=body.key, value=body.value, source="manual", fields=fields
            )
            return {**row.public(), "created": created}

        return _checked(run)

    @_tool(server, "Forget a memory", destructive=True, idempotent=True)
    async def forget_memory(scope: OwnerScope, ownerId: OwnerId, memoryId: str) -> dict[str, Any]:
        """Delete one long-term memory of an agent or a workspace."""
        c = _caller(writes=True)

        def run() -> dict[str, object]:
            memory.delete_memory(c.deps.agents, c.deps.workspaces, c.deps.memories, c.tenant, scope, ownerId, memoryId)
            return {"id": memoryId, "deleted": True}

        return _checked(run)


class _EngramMCP(MCPServer):
    """The SDK's server, its tool failures worded as the REST API's: the tool's own error without
    the SDK's "Error executing tool" prefix, and arguments that break the input schema as
    `validation_error` naming the field (pydantic's dump otherwise)."""

    async def call_tool(
        self, name: str, arguments: dict[str, object], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as err:
            cause = err.__cause__
            if isinstance(cause, ValidationError):
                raise _tool_error(invalid_input(cause.errors())) from None
            if isinstance(cause, ToolError):  # raised by the tool: already {code, message, field}
                raise ToolError(str(cause)) from None
            if self._tool_manager.get_tool(name) is None:
                raise _tool_error(BadRequest(f"there is no tool {name!r}", field="name", code="unknown_tool")) from None
            raise


def _refuse_unknown_arguments(server: MCPServer) -> None:
    """Each tool's arguments model forbids names it does not define (and its input schema says
    `additionalProperties: false`): a misspelt optional argument is an error, not ignored."""
    for tool in server._tool_manager.list_tools():
        base = tool.fn_metadata.arg_model
        config = ConfigDict(**{**base.model_config, "extra": "forbid"})
        strict = cast(type[ArgModelBase], type(base.__name__, (base,), {"model_config": config}))
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


@functools.cache
def server_for(*, writes: bool) -> MCPServer:
    """The server of a caller who may (or may not) write: built once per container each."""
    server = _EngramMCP(
        "engram",
        title="Engram",
        version=__version__,
        instructions="Your Engram memory: facts about you, agents' memories, past conversations.",
    )
    _register_read_tools(server)
    if writes:
        _register_write_tools(server)
    _refuse_unknown_arguments(server)
    return server


# Behind API Gateway and the authorizer: no DNS-rebinding check (the Host is the API's own name).
_NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


_BUILDING = threading.Lock()  # the SDK keeps the last manager it built on the server: read it under the lock


def _manager(writes: bool) -> StreamableHTTPSessionManager:
    """A new stateless session manager (JSON responses) of one of the two servers: its ASGI entry,
    `handle_request`, is what the SDK's Starlette app wraps; Engram calls it directly (one path,
    /mcp, answered by the route). Built through the SDK's public `streamable_http_app` and
    `session_manager` (the app itself is not used), so no private field of the SDK is read."""
    server = server_for(writes=writes)
    with _BUILDING:
        server.streamable_http_app(json_response=True, stateless_http=True, transport_security=_NO_HOST_CHECK)
        return server.session_manager


class _KeptLoop:
    """An event loop kept between requests on the thread that serves them (a Lambda container
    serves one at a time), with each server's session manager running on it: building a loop and
    a manager and entering its `run()` per request was half of the server's own time
    (bench/mcp_server.py). A manager whose `run()` has ended (its task group failed) is replaced on
    the next request. Closed when the process exits."""

    def __init__(self) -> None:
        # Its own loop, not set as the thread's current one (asyncio.get_event_loop stays as it was).
        self.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        self._managers: dict[bool, tuple[StreamableHTTPSessionManager, asyncio.Task[None]]] = {}

    async def manager(self, writes: bool) -> StreamableHTTPSessionManager:
        found = self._managers.get(writes)
        if found is not None and not found[1].done():
            return found[0]
        manager, ready = _manager(writes), asyncio.Event()

        async def host() -> None:
            async with manager.run():
                ready.set()
                await asyncio.Event().wait()  # until the loop closes

        task = asyncio.get_running_loop().create_task(host(), name=f"engram-mcp-manager-{writes}")
        await ready.wait()
        self._managers[writes] = (manager, task)
        return manager

    def close(self) -> None:
        self.runner.close()  # cancels the managers' tasks, which leave run() as the SDK expects


_LOOP: list[_KeptLoop] = []
_LOOP_FREE = threading.Lock()  # the kept loop serves one request at a time


def _kept_loop() -> _KeptLoop:
    if not _LOOP:
        _LOOP.append(_KeptLoop())
        atexit.register(_LOOP[0].close)
    return _LOOP[0]


def _serve(writes: bool, app: Callable[[StreamableHTTPSessionManager], Awaitable[None]]) -> None:
    """`app(manager)` on the kept loop; where it is busy (another thread's request, only when
    several run in one process: the local stack, tests) or this thread already runs a loop, on a
    loop and manager of its own, as every request once did."""
    try:
        asyncio.get_running_loop()
        nested = True
    except RuntimeError:
        nested = False
    if not nested and _LOOP_FREE.acquire(blocking=False):
        try:
            loop = _kept_loop()

            async def kept() -> None:
                await app(await loop.manager(writes))

            loop.runner.run(kept(), context=contextvars.copy_context())
        finally:
            _LOOP_FREE.release()
        return

    async def fresh() -> None:
        manager = _manager(writes)
        async with manager.run():
            await app(manager)

    run_sync(fresh)


def handle(deps: Stores, who: Principal, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    """One POST /mcp: (status, headers, body) as the SDK's transport answers it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "server": ("engram", 443),
        "client": ("127.0.0.1", 0),
    }
    status = [500]
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []
    delivered = [False]

    async def receive() -> dict[str, object]:
        if not delivered[0]:
            delivered[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = int(message["status"])
            for name, value in message.get("headers", []):
                out_headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async def app(manager: StreamableHTTPSessionManager) -> None:
        await manager.handle_request(scope, receive, send)

    token = _CALLER.set(Caller(deps, who))
    try:
        _serve(who.may_write(), app)
    finally:
        _CALLER.reset(token)
    out_headers.pop("content-length", None)
    return status[0], out_headers, b"".join(chunks)
