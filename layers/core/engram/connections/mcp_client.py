"""Talking to remote MCP servers over Streamable HTTP with the official SDK's client (`mcp`).

Imported only where tools are called or tested (the chat and heartbeat functions): the SDK and
its HTTP stack cost a cold start that the api function never pays (tests/unit/test_cold_start_imports.py).

Every failure becomes an `McpFailure` with a short code a person or a model can act on:
`unreachable`, `timeout`, `unauthorized`, `tls_error`, `not_mcp`, `server_error`, `too_large`,
`egress_refused`, `malformed_response`, `protocol_error`.

Protocol versions (TL7): the SDK's client probes `server/discover` (protocol 2026-07-28) and falls
back to the `initialize` handshake (2025-11-25 down to 2024-11-05, whatever the server answers) on
any error answer, an HTTP 400 included; Engram records the HTTP statuses it saw rather than raising
on them, so the fallback runs, and names the failure by them only when the SDK gives up. A server
found to speak the handshake is remembered for a while, so later sessions skip the probe.

Sessions: the calls of one turn go through its `Sessions`, a pool per server. A call takes an idle
session or opens one (parallel calls open parallel sessions, so one flooded or stalled call never
takes another down); the turn's later model rounds reuse them; `Sessions.close()` at the end of the
turn closes them, with HTTP DELETE and the `Mcp-Session-Id` on a stateful server, in the background
(the turn's answer does not wait for the DELETEs). A reused session the server refuses as unknown
(it restarted) is replaced once: the call never ran. The SDK's standing GET stream is not opened
(mcp_http.GuardedTransport): Engram takes no server-initiated messages.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH

from engram.connections.egress import EgressPolicy, Resolver
from engram.connections.mcp_http import ACCEPT_ENCODING, GuardedTransport, McpFailure, Trace, failure_of, watcher
from engram.connections.models import DiscoveredTool
from engram.kernel.aio import background, run_sync

# The SDK and its HTTP client log every request at INFO; a tool call is logged once, by Engram.
for _name in ("httpx2", "httpcore2"):
    logging.getLogger(_name).setLevel(logging.WARNING)
# The client logs a server's bad answers as its own errors; Engram names them in the tool result.
logging.getLogger("mcp.client").setLevel(logging.CRITICAL)

_LEGACY_TTL_S = 600.0  # how long a server found to speak only the handshake skips the discover probe
_CLOSE_S = 2.0  # the bound on closing a session (its DELETE) when the turn ends


@dataclass(frozen=True)
class Endpoint:
    url: str
    headers: tuple[tuple[str, str], ...] = ()  # the auth header, opened for this call only
    timeout_s: float = 20.0


@dataclass(frozen=True)
class Call:
    endpoint: Endpoint
    tool: str
    arguments: dict[str, Any]
    # From the cached tool list: a structured result is checked against it (no listing per call);
    # when it no longer matches, the server's tools are listed again once (`schema_changed`).
    output_schema: dict[str, Any] | None = None


@dataclass
class CallResult:
    """What a tools/call gave: its content blocks and structured content as JSON-ready data."""

    ok: bool
    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False  # the tool itself reported an error
    failure: McpFailure | None = None
    duration_ms: float = 0.0
    bytes: int = 0
    # The server changed the tool's output schema: listed again, this is the new one (cache it).
    schema_changed: bool = False
    output_schema: dict[str, Any] | None = None


# Servers found to speak only the handshake (url -> until when, time.monotonic()): no probe for them.
_LEGACY: dict[str, float] = {}


@asynccontextmanager
async def _session(
    endpoint: Endpoint, policy: EgressPolicy, resolver: Resolver | None, limit: int, trace: Trace
) -> AsyncIterator[Client]:
    """A client session with the server, closed on exit (HTTP DELETE with its Mcp-Session-Id when the
    server gave one)."""
    policy.check_url(endpoint.url)
    transport = GuardedTransport(policy, resolver, limit, trace)
    timeout = httpx2.Timeout(endpoint.timeout_s, connect=min(endpoint.timeout_s, 10.0))
    legacy = _LEGACY.get(endpoint.url, 0.0) > time.monotonic()
    headers = {**dict(endpoint.headers), "Accept-Encoding": ACCEPT_ENCODING}
    try:
        async with (
            httpx2.AsyncClient(
                transport=transport, headers=headers, timeout=timeout, event_hooks={"response": [watcher(trace)]}
            ) as http,
            Client(
                streamable_http_client(endpoint.url, http_client=http, terminate_on_close=True),
                raise_exceptions=True,
                read_timeout_seconds=endpoint.timeout_s,
                cache=None,
                mode="legacy" if legacy else "auto",
            ) as client,
        ):
            if client.session.initialize_result is not None:
                _LEGACY[endpoint.url] = time.monotonic() + _LEGACY_TTL_S
            trace.statuses.clear()  # the probe's refusals are history once the session stands
            trace.foreign_type = None
            yield client
    except BaseException:
        if legacy:
            _LEGACY.pop(endpoint.url, None)  # the server may have changed: probe again next time
        raise


def _dump(value: object) -> Any:
    return value.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(value, "model_dump") else value


def list_tools(
    endpoint: Endpoint,
    policy: EgressPolicy,
    *,
    max_tools: int,
    max_schema_bytes: int,
    max_bytes: int,
    resolver: Resolver | None = None,
    deadline: float | None = None,
) -> list[DiscoveredTool]:
    """The server's tools (every page), each schema checked: a tool whose schema is not a JSON
    object schema, or is over `max_schema_bytes`, fails the listing with a message naming it.
    Bounded by the endpoint's timeout and `deadline` (time.monotonic()), whichever comes first."""
    bound = endpoint.timeout_s if deadline is None else max(0.0, min(endpoint.timeout_s, deadline - time.monotonic()))
    trace = Trace()

    async def run() -> list[DiscoveredTool]:
        with anyio.fail_after(bound):
            async with _session(endpoint, policy, resolver, max_bytes, trace) as client:
                found = await _all_tools(client, max_tools)
        return _checked_tools(found, max_tools=max_tools, max_schema_bytes=max_schema_bytes)

    try:
        return run_sync(run)
    except Exception as err:
        raise failure_of(err, trace) from None


async def _all_tools(client: Client, max_tools: int) -> list[types.Tool]:
    found: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(20):
        page = await client.list_tools(cursor=cursor)
        found += page.tools
        cursor = page.next_cursor
        if not cursor or len(found) > max_tools:
            break
    return found


def _checked_tools(found: Sequence[object], *, max_tools: int, max_schema_bytes: int) -> list[DiscoveredTool]:
    if len(found) > max_tools:
        raise McpFailure("invalid_tool_list", f"the server lists over {max_tools} tools; allow fewer on the server")
    tools = []
    for tool in found:
        name = str(getattr(tool, "name", "") or "")
        schema = _dump(getattr(tool, "input_schema", None)) or {}
        if not name:
            raise McpFailure("invalid_tool_schema", "the server lists a tool without a name")
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise McpFailure("invalid_tool_schema", f"tool {name!r} has an input schema that is not a JSON object schema")
        size = len(json.dumps(schema, ensure_ascii=False))
        if size > max_schema_bytes:
            raise McpFailure("invalid_tool_schema", f"tool {name!r} has an input schema of {size} bytes, over {max_schema_bytes}")
        output = _dump(getattr(tool, "output_schema", None))
        tools.append(
            DiscoveredTool(
                name=name,
                description=str(getattr(tool, "description", "") or "")[:2000],
                input_schema=schema,
                output_schema=output if isinstance(output, dict) else None,
            )
        )
    return tools


def _schema_problem(schema: dict[str, object] | None, result: types.CallToolResult) -> str | None:
    """Why a successful result's structured content does not match the tool's output schema."""
    if schema is None or result.is_error:
        return None
    if result.structured_content is None:
        return "the tool has an output schema but returned no structured content"
    import jsonschema

    try:
        checker = jsonschema.validators.validator_for(schema)
        checker.check_schema(schema)
        error = jsonschema.exceptions.best_match(checker(schema).iter_errors(result.structured_content))
    except jsonschema.SchemaError as err:
        return f"the tool's output schema is not a valid JSON Schema ({err.message[:200]})"
    return None if error is None else f"its structured result does not match its output schema ({error.message[:200]})"


@dataclass
class _Held:
    """One open session of a turn, held open by its owner task until released."""

    client: Client
    trace: Trace
    release: anyio.Event = field(default_factory=anyio.Event)


class Sessions:
    """A turn's MCP sessions: a pool per server (endpoint), held open on the process's background
    loop (kernel.aio) between the turn's model rounds, closed by `close()` when the turn ends."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver | None, max_bytes: int):
        self.policy, self.resolver, self.max_bytes = policy, resolver, max_bytes
        self._idle: dict[Endpoint, list[_Held]] = {}
        self._busy: list[_Held] = []

    def run[T](self, main: Callable[[], Awaitable[T]]) -> T:
        """`main()` on the background loop, from synchronous code."""
        return background().call(main)

    async def _hold(self, endpoint: Endpoint, trace: Trace, *, task_status: TaskStatus[_Held | BaseException]) -> None:
        started = False
        scope = anyio.CancelScope()
        try:
            with scope:
                async with _session(endpoint, self.policy, self.resolver, self.max_bytes, trace) as client:
                    held = _Held(client, trace)
                    task_status.started(held)
                    started = True
                    await held.release.wait()
                    scope.deadline = anyio.current_time() + _CLOSE_S  # the DELETE gets a short while
        except Exception as err:  # opening failed: the caller gets the error; closing failed: nothing to do
            if not started:
                task_status.started(err)

    async def checkout(self, endpoint: Endpoint) -> tuple[_Held, bool]:
        """An idle session with the server (reused: True), or a new one."""
        idle = self._idle.get(endpoint) or []
        while idle:
            held = idle.pop()
            if held.trace.fatal is None:
                self._busy.append(held)
                return held, True
            held.release.set()
        group = background().group
        assert group is not None, "the background loop runs"
        trace = Trace()
        opened: _Held | BaseException = await group.start(self._hold, endpoint, trace)
        if isinstance(opened, BaseException):
            raise _Opening(trace) from opened
        self._busy.append(opened)
        return opened, False

    def checkin(self, endpoint: Endpoint, held: _Held, *, healthy: bool) -> None:
        """Back to the pool for the turn's next call, or closed when the call broke it."""
        if held in self._busy:
            self._busy.remove(held)
        if healthy and held.trace.fatal is None:
            self._idle.setdefault(endpoint, []).append(held)
        else:
            held.release.set()

    def close(self) -> None:
        """Closes every session of the turn (a DELETE each on a stateful server) without waiting for
        them: the sessions' owner tasks send the DELETEs on the background loop, together, each
        bounded by `_CLOSE_S`, while the turn's answer goes out."""
        held = [h for pool in self._idle.values() for h in pool] + self._busy
        self._idle, self._busy = {}, []
        if not held:
            return

        async def release_all() -> None:
            for one in held:
                one.release.set()

        self.run(release_all)


class _Opening(Exception):
    """A session could not be opened; its trace tells what the server answered."""

    def __init__(self, trace: Trace):
        super().__init__("the session could not be opened")
        self.trace = trace


async def _call_once(client: Client, call: Call) -> types.CallToolResult:
    """tools/call, sent as the SDK sends it (its headers), its result checked here against the cached
    output schema rather than by a listing per session. A 2026-07-28 server's HEADER_MISMATCH (the
    session has not listed the tool) is answered as the spec says: list, then send again once."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=call.tool, arguments=call.arguments))
    try:
        return await client.session.send_request(request, types.CallToolResult)
    except MCPError as err:
        if err.code != HEADER_MISMATCH:
            raise
    await _all_tools(client, 1000)
    return await client.session.send_request(request, types.CallToolResult)


async def _call(sessions: Sessions, call: Call, result: CallResult) -> None:
    for attempt in range(2):
        held, reused = await sessions.checkout(call.endpoint)
        healthy = False
        before = held.trace.bytes
        try:
            out = await _call_once(held.client, call)
            await _check_structured(held.client, call, out, result)
            result.ok, result.failure = True, None
            result.content = [_dump(block) for block in out.content or []]
            result.structured = _dump(out.structured_content)
            result.is_error = bool(out.is_error)
            healthy = True
            return
        except MCPError as err:
            if reused and attempt == 0 and _session_refused(held.trace):
                continue  # the server forgot the session (it restarted): the call never ran, so a new one
            result.ok, result.failure = False, failure_of(err, held.trace)
            return
        except Exception as err:
            result.ok, result.failure = False, failure_of(err, held.trace)
            return
        finally:
            result.bytes += held.trace.bytes - before
            sessions.checkin(call.endpoint, held, healthy=healthy)


def _session_refused(trace: Trace) -> bool:
    """The server refused the request for its session, before running it: HTTP 404 (the spec's answer
    to a session it no longer knows; the Python SDK's), or HTTP 400 with a JSON-RPC error of id null,
    a request refused unread (the TypeScript SDK's examples answer an unknown session so: "Bad
    Request: No valid session ID provided"). A 400 answering the call itself carries its id."""
    status = trace.statuses[-1] if trace.statuses else None
    return status == 404 or (status == 400 and trace.unheard)


async def _check_structured(client: Client, call: Call, out: types.CallToolResult, result: CallResult) -> None:
    """The structured result against the tool's output schema; when it does not match, the tools are
    listed again once: a changed schema is taken (and reported to be cached), else the call fails."""
    problem = _schema_problem(call.output_schema, out)
    if problem is None:
        return
    listed = await _all_tools(client, 1000)
    fresh = next((t for t in listed if t.name == call.tool), None)
    schema = _dump(fresh.output_schema) if fresh is not None and fresh.output_schema is not None else None
    result.schema_changed = schema != call.output_schema
    result.output_schema = schema if isinstance(schema, dict) else None
    if result.schema_changed:
        problem = _schema_problem(result.output_schema, out)
    if problem is not None:
        raise McpFailure("protocol_error", f"tool {call.tool!r}: {problem}")


def call_tools(
    calls: list[Call],
    policy: EgressPolicy,
    *,
    deadline: float,
    max_bytes: int,
    resolver: Resolver | None = None,
    sessions: Sessions | None = None,
) -> list[CallResult]:
    """Runs the calls in parallel, each in a session of its own at that moment (a server that fails,
    stalls or floods one call cannot take the others down), sessions taken from and given back to
    `sessions` (the turn's; without it, sessions for these calls only, closed before returning),
    each call bounded by its endpoint's timeout and the `deadline` (time.monotonic()); the results in
    the calls' order."""
    pool = sessions or Sessions(policy, resolver, max_bytes)
    results: list[CallResult] = [CallResult(ok=False) for _ in calls]

    async def one_call(i: int) -> None:
        call = calls[i]
        started = time.monotonic()
        limit = max(0.0, min(call.endpoint.timeout_s, deadline - started))
        try:
            with anyio.fail_after(limit):
                await _call(pool, call, results[i])
        except _Opening as err:
            results[i].ok = False
            results[i].failure = failure_of(err.__cause__ or err, err.trace)
        except Exception as err:
            results[i].ok = False
            results[i].failure = failure_of(err)
        results[i].duration_ms = (time.monotonic() - started) * 1000

    async def run() -> None:
        async with anyio.create_task_group() as group:
            for i in range(len(calls)):
                group.start_soon(one_call, i)

    try:
        pool.run(run)
    finally:
        if sessions is None:
            pool.close()
    return results
