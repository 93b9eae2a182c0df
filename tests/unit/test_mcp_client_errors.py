"""How the MCP client names a failure (issue 33 item 5): by the exception's type and what the
session's HTTP exchanges showed, never by the words of a message; and it reads no private field of
the SDK."""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, PARSE_ERROR
from pydantic import BaseModel, ValidationError

from engram.connections import mcp_client
from engram.connections.mcp_http import Trace as _Trace
from engram.connections.mcp_http import failure_of


def test_an_sdk_error_is_named_by_its_code_and_the_statuses_seen():
    assert failure_of(MCPError(PARSE_ERROR, "whatever the words")).code == "malformed_response"
    assert failure_of(MCPError(INTERNAL_ERROR, "parse json content type")).code == "protocol_error"
    assert failure_of(MCPError(INTERNAL_ERROR, "x"), _Trace(statuses=[400, 404])).code == "not_mcp"
    assert failure_of(MCPError(INTERNAL_ERROR, "x"), _Trace(statuses=[503])).code == "server_error"
    assert failure_of(MCPError(INTERNAL_ERROR, "x"), _Trace(foreign_type="text/html")).code == "not_mcp"


def test_transport_errors_are_named_by_type_through_their_wrappers():
    try:
        try:
            raise ssl.SSLCertVerificationError(1, "some words")
        except ssl.SSLError as err:
            raise httpx2.ConnectError("connect failed") from err
    except httpx2.ConnectError as wrapped:
        assert failure_of(ExceptionGroup("tasks", [wrapped])).code == "tls_error"
    assert failure_of(httpx2.ConnectError("SSL CERTIFICATE words, no TLS error")).code == "unreachable"
    assert failure_of(TimeoutError()).code == "timeout"


def test_a_tool_list_with_a_bad_input_schema_is_named_by_the_validation_error_location():
    class Tool(BaseModel):
        inputSchema: dict[str, object]

    with pytest.raises(ValidationError) as caught:
        Tool.model_validate({"inputSchema": "a string"})
    failure = failure_of(caught.value)
    assert failure.code == "invalid_tool_schema" and "inputSchema" in failure.message


def test_the_client_reads_no_private_field_of_the_sdk():
    tree = ast.parse(Path(mcp_client.__file__).read_text(encoding="utf-8"))
    private = sorted(
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    )
    by_name = sorted(
        f"line {node.lineno}: getattr(..., {node.args[1].value!r})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and str(node.args[1].value).startswith("_")
    )
    assert private + by_name == []


def test_only_a_request_refused_unread_or_a_forgotten_session_is_sent_again():
    """A reused session's call is sent once more in a new session only when the server refused it
    before running it: HTTP 404, or HTTP 400 with a JSON-RPC error of id null (the TypeScript SDK's
    example server on an unknown session). A 400 carrying the call's id is the call's own answer."""
    from engram.connections.mcp_http import watcher
    from engram.kernel.aio import run_sync

    def refused(status: int, body: object, kind: str = "application/json") -> bool:
        trace = _Trace()
        request = httpx2.Request("POST", "http://127.0.0.1/mcp")
        answer = httpx2.Response(status, headers={"content-type": kind}, json=body, request=request)
        run_sync(lambda: watcher(trace)(answer))  # on a thread of its own where a loop already runs
        return mcp_client._session_refused(trace)

    unknown = {"jsonrpc": "2.0", "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}, "id": None}
    assert refused(400, unknown)
    assert refused(404, {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Session not found"}, "id": None})
    assert refused(404, None, "text/plain")
    assert not refused(400, {**unknown, "id": 7})  # answered the call: it may have run
    assert not refused(400, unknown, "text/plain")  # not a JSON-RPC answer: nothing is certain
    assert not refused(500, unknown)
