"""Talking to remote MCP servers over Streamable HTTP with the official SDK's client (`mcp`).

Imported only where tools are called or tested (the chat and heartbeat functions): the SDK and
its HTTP stack cost a cold start that the api function never pays (tests/unit/test_cold_start_imports.py).

Every failure becomes an `McpFailure` with a short code a person or a model can act on:
`unreachable`, `timeout`, `unauthorized`, `tls_error`, `not_mcp`, `server_error`, `too_large`,
`egress_refused`, `protocol_error`. The sync entry points run one event loop per batch of calls;
the calls of one batch run in parallel, one client session per server.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore2
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from engram.connections.egress import EgressPolicy, EgressRefused, Resolver, guarded_backend
from engram.connections.models import DiscoveredTool

# The SDK and its HTTP client log every request at INFO; a tool call is logged once, by Engram.
for _name in ("httpx2", "httpcore2"):
    logging.getLogger(_name).setLevel(logging.WARNING)
# The client logs a server's bad answers as its own errors; Engram names them in the tool result.
logging.getLogger("mcp.client").setLevel(logging.CRITICAL)


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
    # From the cached tool list: the SDK checks a structured result against it, and would list
    # the server's tools again in every new session to find it (one more request per call).
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


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int, counter: list[int]):
        self._inner, self._limit, self._counter = inner, limit, counter

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._counter[0] += len(chunk)
            if self._counter[0] > self._limit:
                raise _TooLarge(f"the server's answer passed {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per container: loading the CA bundle costs ~20 ms, too much per call."""
    return httpx2.create_ssl_context()


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over the egress-guarded network backend, reading at most `limit`
    bytes of any answer (a huge tool output is cut off, not buffered)."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver | None, limit: int, counter: list[int]):
        super().__init__(verify=_ssl_context(), trust_env=False)  # a context of its own would cost ~30 ms
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=guarded_backend(policy, resolver), max_connections=8
        )
        self._limit, self._counter, self._policy = limit, counter, policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._policy.check_url(str(request.url))  # every request, so every redirect too
        response = await super().handle_async_request(request)
        length = response.headers.get("content-length")
        if length and length.isdigit() and int(length) > self._limit:
            await response.aclose()
            raise _TooLarge(f"the server's answer is {length} bytes, over {self._limit}")
        response.stream = _BoundedStream(response.stream, self._limit, self._counter)
        return response


def _unwrap(err: BaseException) -> BaseException:
    """The first meaningful exception inside anyio's exception groups and SDK wrappers."""
    seen = 0
    while seen < 10:
        seen += 1
        if isinstance(err, BaseExceptionGroup) and err.exceptions:
            err = err.exceptions[0]
            continue
        cause = err.__cause__ or err.__context__
        if isinstance(err, (EgressRefused, _TooLarge, httpx2.HTTPStatusError)) or cause is None:
            return err
        if isinstance(cause, (EgressRefused, _TooLarge, httpx2.HTTPError, ssl.SSLError, McpFailure)):
            err = cause
            continue
        return err
    return err


def failure_of(err: BaseException) -> McpFailure:
    """The readable failure behind an exception of the SDK, its HTTP client or the egress guard."""
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
        return _mcp_error_failure(str(err))
    return _transport_failure(err)


def _http_failure(status: int) -> McpFailure:
    if status in (401, 403):
        return McpFailure("unauthorized", f"the tool server refused the credentials (HTTP {status}); check the auth header")
    if status in (404, 405, 406, 415):
        return McpFailure("not_mcp", f"the URL did not answer as an MCP endpoint (HTTP {status}); check the path, e.g. /mcp")
    if status >= 500:
        return McpFailure("server_error", f"the tool server failed (HTTP {status})")
    return McpFailure("protocol_error", f"the tool server answered HTTP {status}")


def _mcp_error_failure(text: str) -> McpFailure:
    lowered = text.lower()
    if "content type" in lowered:
        return McpFailure("not_mcp", "the URL did not answer as an MCP endpoint (it sent a web page or other content)")
    if "parse" in lowered or "json" in lowered:
        return McpFailure("malformed_response", "the tool server's answer is not valid JSON-RPC")
    return McpFailure(
        "protocol_error", f"the tool server answered with an MCP error: {text.splitlines()[0][:200] if text else ''}"
    )


def _transport_failure(err: BaseException) -> McpFailure:
    text = repr(err).upper()
    if isinstance(err, (TimeoutError, httpx2.TimeoutException)):
        return McpFailure("timeout", "the tool server did not answer in time")
    if isinstance(err, (ssl.SSLError, httpx2.ConnectError)) and "SSL" in text and "CERTIFICATE" in text:
        return McpFailure("tls_error", "the tool server's TLS certificate could not be verified")
    if isinstance(err, (httpx2.ConnectError, httpx2.NetworkError, OSError)):
        return McpFailure("unreachable", "the tool server could not be reached (connection refused or no such host)")
    validation = "validation" in type(err).__name__.lower()
    if validation and "inputSchema" in str(err):
        where = next((line.strip() for line in str(err).splitlines() if "inputSchema" in line), "inputSchema")
        return McpFailure(
            "invalid_tool_schema", f"the server lists a tool whose input schema is not a JSON object schema ({where})"
        )
    if validation or isinstance(err, ValueError):
        return McpFailure("malformed_response", "the tool server's answer is not valid JSON-RPC")
    return McpFailure("protocol_error", f"the tool call failed: {type(err).__name__}")


async def _raise_for_status(response: httpx2.Response) -> None:
    if response.status_code >= 400 and response.status_code != 405:  # 405: the server has no GET stream, fine
        await response.aread()
        response.raise_for_status()


@asynccontextmanager
async def _session(
    endpoint: Endpoint, policy: EgressPolicy, resolver: Resolver | None, limit: int, counter: list[int]
) -> AsyncIterator[Client]:
    policy.check_url(endpoint.url)
    transport = _GuardedTransport(policy, resolver, limit, counter)
    timeout = httpx2.Timeout(endpoint.timeout_s, connect=min(endpoint.timeout_s, 10.0))
    async with (
        httpx2.AsyncClient(
            transport=transport, headers=dict(endpoint.headers), timeout=timeout, event_hooks={"response": [_raise_for_status]}
        ) as http,
        Client(
            streamable_http_client(endpoint.url, http_client=http, terminate_on_close=False),
            raise_exceptions=True,
            read_timeout_seconds=endpoint.timeout_s,
            cache=None,
        ) as client,
    ):
        yield client


def _run_async[T](run: Callable[[], Awaitable[T]]) -> T:
    """The async client from synchronous code: its own event loop, on this thread, or on a thread of
    its own when this one already runs a loop (an embedding async app; the sync Playwright API of the
    browser tests keeps one running on the main thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(run)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-mcp") as pool:
        return pool.submit(anyio.run, run).result()


def _prime_output_schema(client: Client, call: Call) -> None:
    """Hands the session the tool's output schema from the cached list. The SDK keeps it in a
    private table: if that ever moves, the session lists the tools itself (one request more)."""
    known = getattr(client.session, "_tool_output_schemas", None)
    if isinstance(known, dict):
        known.setdefault(call.tool, call.output_schema)


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

    async def run() -> list[DiscoveredTool]:
        counter = [0]
        with anyio.fail_after(bound):
            async with _session(endpoint, policy, resolver, max_bytes, counter) as client:
                found: list[Any] = []
                cursor: str | None = None
                for _ in range(20):
                    page = await client.list_tools(cursor=cursor)
                    found += page.tools
                    cursor = page.next_cursor
                    if not cursor or len(found) > max_tools:
                        break
        return _checked_tools(found, max_tools=max_tools, max_schema_bytes=max_schema_bytes)

    try:
        return _run_async(run)
    except Exception as err:
        raise failure_of(err) from None


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


def call_tools(
    calls: list[Call], policy: EgressPolicy, *, deadline: float, max_bytes: int, resolver: Resolver | None = None
) -> list[CallResult]:
    """Runs the calls in parallel, each in a session of its own (a server that fails, stalls or
    floods one call cannot take the others down), each bounded by its endpoint's timeout and the
    `deadline` (time.monotonic()); the results in the calls' order."""
    results: list[CallResult] = [CallResult(ok=False) for _ in calls]

    async def one_call(i: int) -> None:
        call = calls[i]
        started = time.monotonic()
        counter = [0]
        limit = max(0.0, min(call.endpoint.timeout_s, deadline - started))
        try:
            with anyio.fail_after(limit):
                async with _session(call.endpoint, policy, resolver, max_bytes, counter) as client:
                    _prime_output_schema(client, call)
                    out = await client.call_tool(call.tool, call.arguments)
            results[i] = CallResult(
                ok=True,
                content=[_dump(block) for block in out.content or []],
                structured=_dump(out.structured_content),
                is_error=bool(out.is_error),
            )
        except Exception as err:
            results[i] = CallResult(ok=False, failure=failure_of(err))
        results[i].duration_ms = (time.monotonic() - started) * 1000
        results[i].bytes = counter[0]

    async def run() -> None:
        async with anyio.create_task_group() as group:
            for i in range(len(calls)):
                group.start_soon(one_call, i)

    _run_async(run)
    return results
