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
turn closes them, with HTTP DELETE and the `Mcp-Session-Id` on a stateful server.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore2
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH, PARSE_ERROR
from pydantic import ValidationError

from engram.connections.egress import EgressPolicy, EgressRefused, Resolver, guarded_backend
from engram.connections.models import DiscoveredTool
from engram.kernel.aio import background, run_sync

# The SDK and its HTTP client log every request at INFO; a tool call is logged once, by Engram.
for _name in ("httpx2", "httpcore2"):
    logging.getLogger(_name).setLevel(logging.WARNING)
# The client logs a server's bad answers as its own errors; Engram names them in the tool result.
logging.getLogger("mcp.client").setLevel(logging.CRITICAL)

# What Engram decodes itself, counting the decoded bytes against the limit (TL8). httpx2 decodes br
# only with the optional `brotli` package, which is not installed: br is neither asked for nor taken.
ACCEPT_ENCODING = "gzip, deflate"
_LEGACY_TTL_S = 600.0  # how long a server found to speak only the handshake skips the discover probe
_CLOSE_S = 2.0  # the bound on closing a session (its DELETE) when the turn ends


class McpFailure(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _TooLarge(Exception):
    pass


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


@dataclass
class _Trace:
    """What one session's HTTP exchanges showed: the error statuses and foreign content types the
    SDK turns into generic errors, the first failure of Engram's own (too large, egress), and the
    decoded bytes read."""

    statuses: list[int] = field(default_factory=list)
    foreign_type: str | None = None
    fatal: McpFailure | None = None
    bytes: int = 0

    def fail(self, failure: McpFailure) -> McpFailure:
        self.fatal = self.fatal or failure
        return failure


class _DecodedStream(httpx2.AsyncByteStream):
    """An answer's body decoded (gzip, deflate or none) and counted as decoded bytes: reading stops
    one byte past `limit` (a 30 KB gzip that inflates to 30 MB is never inflated)."""

    def __init__(self, inner: httpx2.AsyncByteStream, encoding: str, limit: int, trace: _Trace):
        self._inner, self._limit, self._trace, self._count = inner, limit, trace, 0
        self._encoding = encoding
        wbits = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}.get(encoding)
        self._inflate = zlib.decompressobj(wbits) if wbits is not None else None
        self._first = True

    def _counted(self, data: bytes) -> bytes:
        self._count += len(data)
        self._trace.bytes += len(data)
        if self._count > self._limit:
            failure = McpFailure("too_large", f"the server's answer passed {self._limit} bytes (decoded)")
            raise _TooLarge(self._trace.fail(failure).message)
        return data

    def _inflated(self, chunk: bytes) -> Iterator[bytes]:
        assert self._inflate is not None
        data = chunk
        while data:
            room = max(1, self._limit - self._count + 1)  # never more than one byte past the limit
            try:
                out = self._inflate.decompress(data, room)
            except zlib.error:
                if not (self._first and self._encoding == "deflate"):
                    raise
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
                self._first = False
                continue
            self._first = False
            yield self._counted(out)
            data = self._inflate.unconsumed_tail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            if self._inflate is None:
                yield self._counted(chunk)
                continue
            for out in self._inflated(chunk):
                if out:
                    yield out
        if self._inflate is not None:
            tail = self._counted(self._inflate.flush())
            if tail:
                yield tail

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per container: loading the CA bundle costs ~20 ms, too much per call."""
    return httpx2.create_ssl_context()


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over the egress-guarded network backend, reading at most `limit` decoded
    bytes of any answer (a huge or inflating tool output is cut off, not buffered)."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver | None, limit: int, trace: _Trace):
        super().__init__(verify=_ssl_context(), trust_env=False)  # a context of its own would cost ~30 ms
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=guarded_backend(policy, resolver), max_connections=8
        )
        self._limit, self._trace, self._policy = limit, trace, policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            self._policy.check_url(str(request.url))  # every request, so every redirect too
        except EgressRefused as err:
            self._trace.fail(McpFailure("egress_refused", err.message))
            raise
        response = await super().handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower() or "identity"
        if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
            await response.aclose()
            failure = McpFailure("malformed_response", f"the server answered in an encoding Engram did not ask for ({encoding})")
            raise _TooLarge(self._trace.fail(failure).message)
        length = response.headers.get("content-length")
        if encoding == "identity" and length and length.isdigit() and int(length) > self._limit:
            await response.aclose()
            failure = McpFailure("too_large", f"the server's answer is {length} bytes, over {self._limit}")
            raise _TooLarge(self._trace.fail(failure).message)
        assert isinstance(response.stream, httpx2.AsyncByteStream), "an async transport answers with an async stream"
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
        return httpx2.Response(
            status_code=response.status_code,
            headers=headers,
            stream=_DecodedStream(response.stream, encoding, self._limit, self._trace),
            extensions=response.extensions,
            request=request,
        )


def _chain(err: BaseException) -> Iterator[BaseException]:
    """The exception, the first of each exception group inside it, and their causes."""
    seen = 0
    current: BaseException | None = err
    while current is not None and seen < 12:
        seen += 1
        yield current
        if isinstance(current, BaseExceptionGroup) and current.exceptions:
            current = current.exceptions[0]
        else:
            current = current.__cause__ or current.__context__


def _unwrap(err: BaseException) -> BaseException:
    """The meaningful exception inside anyio's exception groups and the SDK's wrappers: Engram's own,
    an HTTP status, then the first error of the HTTP stack or TLS, else the first non-group."""
    found = [e for e in _chain(err) if not isinstance(e, BaseExceptionGroup)]
    for kinds in ((McpFailure, EgressRefused, _TooLarge, httpx2.HTTPStatusError), (httpx2.HTTPError, ssl.SSLError)):
        hit = next((e for e in found if isinstance(e, kinds)), None)
        if hit is not None:
            return hit
    return found[0] if found else err


def failure_of(err: BaseException, trace: _Trace | None = None) -> McpFailure:
    """The readable failure behind an exception of the SDK, its HTTP client or the egress guard,
    told by the exception's type (and what the session's HTTP exchanges showed), never its words."""
    if trace is not None and trace.fatal is not None:
        return trace.fatal
    err = _unwrap(err)
    if isinstance(err, McpFailure):
        return err
    if isinstance(err, EgressRefused):
        return McpFailure("egress_refused", err.message)
    if isinstance(err, _TooLarge):
        return McpFailure("too_large", str(err))
    if isinstance(err, httpx2.HTTPStatusError):
        return _http_failure(err.response.status_code)
    if isinstance(err, MCPError):
        return _mcp_error_failure(err, trace)
    return _transport_failure(err)


def _http_failure(status: int) -> McpFailure:
    if status in (401, 403):
        return McpFailure("unauthorized", f"the tool server refused the credentials (HTTP {status}); check the auth header")
    if status in (404, 405, 406, 415):
        return McpFailure("not_mcp", f"the URL did not answer as an MCP endpoint (HTTP {status}); check the path, e.g. /mcp")
    if status >= 500:
        return McpFailure("server_error", f"the tool server failed (HTTP {status})")
    return McpFailure("protocol_error", f"the tool server answered HTTP {status}")


def _mcp_error_failure(err: MCPError, trace: _Trace | None) -> McpFailure:
    if trace is not None and trace.foreign_type is not None:
        return McpFailure(
            "not_mcp", f"the URL did not answer as an MCP endpoint (it sent {trace.foreign_type[:60]}, e.g. a web page)"
        )
    if trace is not None and trace.statuses:
        return _http_failure(trace.statuses[-1])
    if err.code == PARSE_ERROR:
        return McpFailure("malformed_response", "the tool server's answer is not valid JSON-RPC")
    first = err.message.splitlines()[0][:200] if err.message else ""
    return McpFailure("protocol_error", f"the tool server answered with an MCP error ({err.code}): {first}")


def _transport_failure(err: BaseException) -> McpFailure:
    if isinstance(err, (TimeoutError, httpx2.TimeoutException)):
        return McpFailure("timeout", "the tool server did not answer in time")
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in _chain(err)):
        return McpFailure("tls_error", "the tool server's TLS certificate could not be verified")
    if isinstance(err, (httpx2.ConnectError, httpx2.NetworkError, OSError)):
        return McpFailure("unreachable", "the tool server could not be reached (connection refused or no such host)")
    if isinstance(err, ValidationError):
        where = next(
            (".".join(map(str, e["loc"])) for e in err.errors() if "inputSchema" in map(str, e["loc"])),
            None,
        )
        if where is not None:
            return McpFailure(
                "invalid_tool_schema", f"the server lists a tool whose input schema is not a JSON object schema ({where})"
            )
    if isinstance(err, (ValidationError, ValueError)):
        return McpFailure("malformed_response", "the tool server's answer is not valid JSON-RPC")
    return McpFailure("protocol_error", f"the tool call failed: {type(err).__name__}")


def _watcher(trace: _Trace) -> Callable[[httpx2.Response], Awaitable[None]]:
    """The response hook: credentials refused end the session at once; other error answers are only
    recorded, so the SDK can fall back from the discover probe to the initialize handshake (an HTTP
    400 is how servers of the handshake era refuse the probe)."""

    async def watch(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            await response.aread()
            response.raise_for_status()
        if response.request.method != "POST":
            return  # the GET stream (405 where a server has none) and the DELETE are the SDK's business
        if response.status_code >= 400:
            trace.statuses.append(response.status_code)
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if (
            200 <= response.status_code < 300
            and response.status_code != 202
            and kind not in ("application/json", "text/event-stream")
        ):
            trace.foreign_type = kind or "no content type"

    return watch


# Servers found to speak only the handshake (url -> until when, time.monotonic()): no probe for them.
_LEGACY: dict[str, float] = {}


@asynccontextmanager
async def _session(
    endpoint: Endpoint, policy: EgressPolicy, resolver: Resolver | None, limit: int, trace: _Trace
) -> AsyncIterator[Client]:
    """A client session with the server, closed on exit (HTTP DELETE with its Mcp-Session-Id when the
    server gave one)."""
    policy.check_url(endpoint.url)
    transport = _GuardedTransport(policy, resolver, limit, trace)
    timeout = httpx2.Timeout(endpoint.timeout_s, connect=min(endpoint.timeout_s, 10.0))
    legacy = _LEGACY.get(endpoint.url, 0.0) > time.monotonic()
    headers = {**dict(endpoint.headers), "Accept-Encoding": ACCEPT_ENCODING}
    try:
        async with (
            httpx2.AsyncClient(
                transport=transport, headers=headers, timeout=timeout, event_hooks={"response": [_watcher(trace)]}
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
    trace = _Trace()

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
    trace: _Trace
    release: anyio.Event = field(default_factory=anyio.Event)


class Sessions:
    """A turn's MCP sessions: a pool per server (endpoint), held open on the process's background
    loop (kernel.aio) between the turn's model rounds, closed by `close()` when the turn ends."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver | None, max_bytes: int):
        self.policy, self.resolver, self.max_bytes = policy, resolver, max_bytes
        self._idle: dict[Endpoint, list[_Held]] = {}
        self._busy: list[_Held] = []
        self._owners: list[anyio.Event] = []  # set when a session's owner task has closed it

    def run[T](self, main: Callable[[], Awaitable[T]]) -> T:
        """`main()` on the background loop, from synchronous code."""
        return background().call(main)

    async def _hold(self, endpoint: Endpoint, trace: _Trace, *, task_status: TaskStatus[_Held | BaseException]) -> None:
        started = False
        done = anyio.Event()
        self._owners.append(done)
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
        finally:
            done.set()

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
        trace = _Trace()
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
        """Closes every session of the turn (a DELETE each on a stateful server, together, at most
        ~2 s) and waits for them."""
        if not self._owners:
            return
        held = [h for pool in self._idle.values() for h in pool] + self._busy
        owners, self._owners, self._idle, self._busy = self._owners, [], {}, []

        async def close_all() -> None:
            for one in held:
                one.release.set()
            with anyio.move_on_after(_CLOSE_S + 1.0):
                for done in owners:
                    await done.wait()

        self.run(close_all)


class _Opening(Exception):
    """A session could not be opened; its trace tells what the server answered."""

    def __init__(self, trace: _Trace):
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
            if reused and attempt == 0 and held.trace.statuses[-1:] == [404]:
                continue  # the server forgot the session (it restarted): the call never ran, so a new one
            result.ok, result.failure = False, failure_of(err, held.trace)
            return
        except Exception as err:
            result.ok, result.failure = False, failure_of(err, held.trace)
            return
        finally:
            result.bytes += held.trace.bytes - before
            sessions.checkin(call.endpoint, held, healthy=healthy)


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
