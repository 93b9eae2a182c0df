"""The HTTP under Engram's MCP client: an egress-guarded transport that decodes answers itself and
counts decoded bytes against the limit (a gzip bomb is never inflated past it, TL8), the response
hook that records what the SDK turns into generic errors, and the naming of every failure as an
`McpFailure` with a short code a person or a model can act on: `unreachable`, `timeout`,
`unauthorized`, `tls_error`, `not_mcp`, `server_error`, `too_large`, `egress_refused`,
`malformed_response`, `protocol_error` (by the exception's type, never its words).
"""

from __future__ import annotations

import functools
import json
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import anyio
import httpcore2
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import PARSE_ERROR
from pydantic import ValidationError

from engram.connections.egress import EgressPolicy, EgressRefused, Resolver, guarded_backend

# What Engram decodes itself, counting the decoded bytes against the limit (TL8). httpx2 decodes br
# only with the optional `brotli` package, which is not installed: br is neither asked for nor taken.
ACCEPT_ENCODING = "gzip, deflate"


class McpFailure(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class TooLarge(Exception):
    pass


@dataclass
class Trace:
    """What one session's HTTP exchanges showed: the error statuses and foreign content types the
    SDK turns into generic errors, the first failure of Engram's own (too large, egress), and the
    decoded bytes read."""

    statuses: list[int] = field(default_factory=list)
    foreign_type: str | None = None
    fatal: McpFailure | None = None
    bytes: int = 0
    # The last refused POST was answered with a JSON-RPC error of id null: the server refused the
    # request before reading it (e.g. for its session), so it never ran.
    unheard: bool = False

    def fail(self, failure: McpFailure) -> McpFailure:
        self.fatal = self.fatal or failure
        return failure


class _DecodedStream(httpx2.AsyncByteStream):
    """An answer's body decoded (gzip, deflate or none) and counted as decoded bytes: reading stops
    one byte past `limit` (a 30 KB gzip that inflates to 30 MB is never inflated)."""

    def __init__(self, inner: httpx2.AsyncByteStream, encoding: str, limit: int, trace: Trace):
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
            raise TooLarge(self._trace.fail(failure).message)
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


class _Silent(httpx2.AsyncByteStream):
    """The body of the standing GET stream Engram does not open: nothing, until the session closes
    (its task is cancelled then)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await anyio.sleep_forever()
        yield b""  # never reached: makes this an async generator


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per container: loading the CA bundle costs ~20 ms, too much per call."""
    return httpx2.create_ssl_context()


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over the egress-guarded network backend, reading at most `limit` decoded
    bytes of any answer (a huge or inflating tool output is cut off, not buffered)."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver | None, limit: int, trace: Trace):
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
        if request.method == "GET" and "last-event-id" not in request.headers:
            # The SDK opens a standing GET stream for server-initiated messages on every stateful
            # session, and has no option not to. Engram takes none (no sampling, elicitation or roots;
            # no list-changed cache): the stream is answered here, silent, and never costs the server
            # a connection. A GET resuming a broken answer (Last-Event-ID) goes to the server.
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Silent(), request=request)
        response = await super().handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower() or "identity"
        if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
            await response.aclose()
            failure = McpFailure("malformed_response", f"the server answered in an encoding Engram did not ask for ({encoding})")
            raise TooLarge(self._trace.fail(failure).message)
        length = response.headers.get("content-length")
        if encoding == "identity" and length and length.isdigit() and int(length) > self._limit:
            await response.aclose()
            failure = McpFailure("too_large", f"the server's answer is {length} bytes, over {self._limit}")
            raise TooLarge(self._trace.fail(failure).message)
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
    for kinds in ((McpFailure, EgressRefused, TooLarge, httpx2.HTTPStatusError), (httpx2.HTTPError, ssl.SSLError)):
        hit = next((e for e in found if isinstance(e, kinds)), None)
        if hit is not None:
            return hit
    return found[0] if found else err


def failure_of(err: BaseException, trace: Trace | None = None) -> McpFailure:
    """The readable failure behind an exception of the SDK, its HTTP client or the egress guard,
    told by the exception's type (and what the session's HTTP exchanges showed), never its words."""
    if trace is not None and trace.fatal is not None:
        return trace.fatal
    err = _unwrap(err)
    if isinstance(err, McpFailure):
        return err
    if isinstance(err, EgressRefused):
        return McpFailure("egress_refused", err.message)
    if isinstance(err, TooLarge):
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


def _mcp_error_failure(err: MCPError, trace: Trace | None) -> McpFailure:
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


async def _unheard(response: httpx2.Response) -> bool:
    """Whether an error answer is a JSON-RPC error with id null (the body is read here, within the
    transport's limit; the SDK reads it again from memory)."""
    if not response.headers.get("content-type", "").lower().startswith("application/json"):
        return False
    try:
        body = json.loads(await response.aread())
    except (ValueError, httpx2.HTTPError, TooLarge):
        return False
    return isinstance(body, dict) and "error" in body and body.get("id", 0) is None


def watcher(trace: Trace) -> Callable[[httpx2.Response], Awaitable[None]]:
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
            trace.unheard = await _unheard(response)
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if (
            200 <= response.status_code < 300
            and response.status_code != 202
            and kind not in ("application/json", "text/event-stream")
        ):
            trace.foreign_type = kind or "no content type"

    return watch
