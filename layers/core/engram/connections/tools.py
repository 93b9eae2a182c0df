"""An agent's MCP tools in a turn (TL2, TL3): the tool source the engine asks per turn, and the
tool set it gets: discovered tools named `mcp__<connection>__<tool>`, calls in parallel, every
failure an is_error result, results bounded before they reach the model (the full one is kept).

Imports of the MCP SDK wait for the first listing or call (engram.connections.mcp_client), so a
turn of an agent without connections never loads it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from engram.connections import health as health_book
from engram.connections.egress import EgressPolicy
from engram.connections.models import Connection, DiscoveredTool, Health, HealthError, ToolList, secret_context
from engram.connections.oauth import NeedsAuthorization, OAuthDeps, bearer, distrust
from engram.connections.ports import SecretBox
from engram.conversations.ports import Transcripts
from engram.engine.tools import ToolContext, ToolOutcome
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metric_by
from engram.kernel.settings import Settings

if TYPE_CHECKING:
    from engram.connections.mcp_client import CallResult, Endpoint, Sessions

PREFIX = "mcp__"
_NAME_MAX = 64  # what every model provider accepts as a tool name
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SECRET_TTL_S = 300.0  # an opened auth value is reused this long within a container


class McpToolDeps(OAuthDeps, Protocol):
    @property
    def history(self) -> Transcripts: ...


def tool_name(connection: str, tool: str) -> str:
    """`mcp__<connection>__<tool>`, the tool's part made safe and cut to fit the name limit."""
    safe = _UNSAFE.sub("_", tool)
    return f"{PREFIX}{connection}__{safe}"[:_NAME_MAX]


def name_collisions(connection: str, tools: list[DiscoveredTool]) -> list[tuple[str, str, str]]:
    """(first tool, second tool, the name both become) for tools whose names meet after sanitising
    or the 64-character cut: neither may hide the other."""
    seen: dict[str, str] = {}
    found = []
    for tool in tools:
        name = tool_name(connection, tool.name)
        if name in seen:
            found.append((seen[name], tool.name, name))
        else:
            seen[name] = tool.name
    return found


class _OpenedSecrets:
    """Auth values opened by KMS, kept briefly per container (keyed by the sealed value, so a
    replaced one is never served)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str, str], tuple[float, str]] = {}

    def get(self, box: SecretBox, tenant: str, connection_id: str, sealed: str) -> str:
        key = (tenant, connection_id, sealed)
        now = time.monotonic()
        with self._lock:
            hit = self._values.get(key)
            if hit and hit[0] > now:
                return hit[1]
        value = box.open(sealed, secret_context(tenant, connection_id))
        with self._lock:
            self._values = {k: v for k, v in self._values.items() if v[0] > now}
            self._values[key] = (now + _SECRET_TTL_S, value)
        return value


OPENED = _OpenedSecrets()


@dataclass(frozen=True)
class _Entry:
    connection: Connection
    tool: DiscoveredTool
    sealed_auth: str | None


@dataclass
class McpToolSet:
    """The MCP tools of one agent for one turn. Tools of a server that is down (or could not be
    listed just now) are still offered, marked unavailable with the reason, so the model can tell
    the person; a call to one answers an error at once, without contacting the server."""

    deps: McpToolDeps
    tenant: str
    entries: dict[str, _Entry] = field(default_factory=dict)
    call_tools: Callable[..., list[CallResult]] | None = None  # tests may swap the transport here
    _sessions: Sessions | None = None  # the turn's MCP sessions, reused by its model rounds
    lists: dict[str, ToolList] = field(default_factory=dict)  # connection id -> the list the entries came from
    # By connection id: its health as this turn knows it, and why its tools are unavailable.
    health: dict[str, Health] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    write: health_book.Write = field(default=health_book.write_now)  # where health writes run

    def close(self) -> None:
        """The end of the turn: its MCP sessions closed (HTTP DELETE on stateful servers)."""
        sessions, self._sessions = self._sessions, None
        if sessions is not None:
            try:
                sessions.close()
            except Exception as err:  # the turn's answer never waits on a server that will not close
                logger.warning("MCP sessions could not be closed", extra={"error": repr(err)})

    def specs(self) -> list[dict[str, object]]:
        return [
            {
                "name": name,
                "description": self._description(entry)[:1024],
                "input_schema": entry.tool.input_schema or {"type": "object", "properties": {}},
            }
            for name, entry in sorted(self.entries.items())
        ]

    def _description(self, entry: _Entry) -> str:
        why = self.unavailable.get(entry.connection.id)
        head = f"[{entry.connection.name}]{_lapsed(entry.connection)}" + (
            f" [UNAVAILABLE: {why}; calling it only returns this error]" if why else ""
        )
        return f"{head} {entry.tool.description}".strip()

    def owns(self, name: str) -> bool:
        return name in self.entries

    def granted(self, name: str) -> tuple[str, str] | None:
        """(connection id, the server's tool name) of a tool this set offers (engine.holds, TL10)."""
        entry = self.entries.get(name)
        return (entry.connection.id, entry.tool.name) if entry is not None else None

    def _why_unavailable(self, connection_id: str) -> str | None:
        health = self.health.get(connection_id)
        if health is not None and health.cooling(now_iso()):
            return health_book.unavailable_reason(health)
        return self.unavailable.get(connection_id)

    def call_many(self, uses: list[dict[str, Any]], ctx: ToolContext, deadline: float) -> list[ToolOutcome]:
        from engram.connections.mcp_client import Call, Sessions, call_tools
        from engram.connections.mcp_http import McpFailure

        settings = self.deps.settings
        outcomes: list[ToolOutcome | None] = [None] * len(uses)
        calls: list[Call] = []
        placed: list[int] = []
        for i, use in enumerate(uses):
            entry = self.entries[use["name"]]
            given = use.get("input")
            arguments: dict[str, Any] = given if isinstance(given, dict) else {}
            why = self._why_unavailable(entry.connection.id)
            if why is not None:
                outcomes[i] = _failed(entry, McpFailure("unavailable", f"not called: {why}. Tell the user if the task needs it"))
                continue
            try:
                endpoint = endpoint_of(self.deps, self.tenant, entry.connection, entry.sealed_auth)
            except NeedsAuthorization as err:  # an OAuth grant that lapsed (TL9): this call says so
                outcomes[i] = _failed(entry, err)
                continue
            except Exception:  # the auth value could not be opened: this call fails, the turn goes on
                logger.warning("a connection's auth value could not be opened", extra={"connection": entry.connection.id})
                outcomes[i] = _failed(entry, McpFailure("unauthorized", "the connection's stored credentials could not be read"))
                continue
            calls.append(Call(endpoint, entry.tool.name, arguments, entry.tool.output_schema))
            placed.append(i)
        policy, limit = policy_of(settings), settings.tool_response_max_bytes
        results: list[CallResult] = []
        if calls and self.call_tools is not None:
            results = self.call_tools(calls, policy, deadline=deadline, max_bytes=limit)
        elif calls:
            if self._sessions is None:
                self._sessions = Sessions(policy, None, limit)
            results = call_tools(calls, policy, deadline=deadline, max_bytes=limit, sessions=self._sessions)
        for i, result in zip(placed, results, strict=True):
            outcomes[i] = self._outcome(ctx, uses[i], self.entries[uses[i]["name"]], result)
        self._note_health([(self.entries[uses[i]["name"]].connection, result) for i, result in zip(placed, results, strict=True)])
        done = [o for o in outcomes if o is not None]
        assert len(done) == len(uses), "every tool use gets an outcome"
        return done

    def _note_health(self, reached: list[tuple[Connection, CallResult]]) -> None:
        """One outcome per server for a batch: a success if any call reached it, else its first
        counted failure."""
        by_server: dict[str, tuple[Connection, HealthError | None]] = {}
        for connection, result in reached:
            failure = None if result.failure is None else HealthError(code=result.failure.code, message=result.failure.message)
            known = by_server.get(connection.id)
            if known is None or (known[1] is not None and (failure is None or not health_book.counts(known[1].code))):
                by_server[connection.id] = (connection, failure)
        for connection, failure in by_server.values():
            seen = self.health.get(connection.id, connection.health)
            self.health[connection.id] = health_book.note(
                self.deps.connections, self.tenant, connection, seen, failure, self.write
            )

    def _outcome(self, ctx: ToolContext, use: dict[str, object], entry: _Entry, result: CallResult) -> ToolOutcome:
        _count(entry.connection.name, result)
        if result.schema_changed:
            self._new_output_schema(str(use["name"]), entry, result.output_schema)
        if result.failure is not None:
            if result.failure.code == "unauthorized" and entry.connection.oauth is not None:
                distrust(self.deps, self.tenant, entry.connection.id)  # TL9: renewed before the next call
            outcome = _failed(entry, result.failure)
            return ToolOutcome(
                outcome.content,
                is_error=True,
                record={**outcome.record, "durationMs": round(result.duration_ms, 1), "bytes": result.bytes},
            )
        text = result_text(result.content, result.structured)
        limit = self.deps.settings.tool_result_max_chars
        record: dict[str, Any] = {
            "connection": entry.connection.name,
            "tool": entry.tool.name,
            "durationMs": round(result.duration_ms, 1),
            "bytes": result.bytes,
        }
        if result.is_error:
            record["error"] = "tool_error"
        if len(text) > limit:
            kept = self._keep_full(ctx, use, {"content": result.content, "structuredContent": result.structured})
            record.update(truncated=len(text), fullResultKept=kept)
            where = "kept with the run" if kept else "not kept (storage failed)"
            text = text[:limit] + f"\n[cut: {limit} of {len(text)} characters shown; the full result is {where}]"
        return ToolOutcome(text, is_error=result.is_error, record=record)

    def _new_output_schema(self, name: str, entry: _Entry, schema: dict[str, object] | None) -> None:
        """The server changed a tool's output schema: the cached list gets the new one (the next
        calls, of this turn and later ones, check against it)."""
        tool = entry.tool.model_copy(update={"output_schema": schema})
        self.entries[name] = _Entry(entry.connection, tool, entry.sealed_auth)
        listed = self.lists.get(entry.connection.id)
        if listed is None:
            return
        tools = [tool if t.name == tool.name else t for t in listed.tools]
        self.lists[entry.connection.id] = listed = listed.model_copy(update={"tools": tools})
        try:
            self.deps.connections.put_tools(self.tenant, entry.connection.id, listed)
        except Exception:
            logger.exception("could not cache a tool's new output schema", extra={"connection": entry.connection.id})

    def _keep_full(self, ctx: ToolContext, use: dict[str, Any], full: dict[str, object]) -> bool:
        try:
            self.deps.history.put_tool_result(self.tenant, ctx.agent.id, ctx.run_id, use["id"], full)
            return True
        except Exception:
            logger.exception("could not keep a tool's full result", extra={"run_id": ctx.run_id})
            return False


def endpoint_of(deps: McpToolDeps, tenant: str, connection: Connection, sealed: str | None) -> Endpoint:
    """Where and how to reach a connection's server: its URL, timeout and (opened) auth header."""
    from engram.connections.mcp_client import Endpoint

    headers: tuple[tuple[str, str], ...] = ()
    if connection.oauth is not None:  # an OAuth grant, refreshed here when it is about to expire (TL9)
        token = bearer(deps, tenant, connection, sealed, opened=lambda t, c, s: OPENED.get(deps.secret_box, t, c, s))
        headers = (("Authorization", f"Bearer {token}"),)
    elif sealed and connection.auth_header_name:
        headers = ((connection.auth_header_name, OPENED.get(deps.secret_box, tenant, connection.id, sealed)),)
    return Endpoint(url=connection.url, headers=headers, timeout_s=float(connection.timeout_seconds))


def _lapsed(connection: Connection) -> str:
    """The note on the tools of an OAuth connection that needs authorization (TL9)."""
    if connection.oauth is not None and connection.oauth.status != "authorized":
        return " [unavailable: the connection needs authorization by its owner]"
    return ""


def _failed(entry: _Entry, failure: Any) -> ToolOutcome:
    message = f"{entry.connection.name} tool {entry.tool.name} failed ({failure.code}): {failure.message}"
    return ToolOutcome(
        message,
        is_error=True,
        record={"connection": entry.connection.name, "tool": entry.tool.name, "error": failure.code},
    )


def _count(connection: str, result: CallResult) -> None:
    """ToolCalls, ToolCallErrors and ToolCallLatency per connection (CloudWatch), and a log line."""
    error = result.failure.code if result.failure else ("tool_error" if result.is_error else None)
    metric_by("ToolCalls", MetricUnit.Count, 1, Connection=connection)
    metric_by("ToolCallLatency", MetricUnit.Milliseconds, result.duration_ms, Connection=connection)
    if error:
        metric_by("ToolCallErrors", MetricUnit.Count, 1, Connection=connection)
    logger.info(
        "tool call",
        extra={"connection": connection, "duration_ms": round(result.duration_ms, 1), "bytes": result.bytes, "error": error},
    )


def result_text(content: list[dict[str, Any]], structured: object) -> str:
    """What the model reads of a tool result: its text blocks, a line for other blocks, and the
    structured content as JSON when no text carries it."""
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource":
            resource = block.get("resource") or {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content: {block.get('mimeType', 'unknown type')}]")
    if structured is not None and not parts:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts) if parts else "(the tool returned nothing)"


def policy_of(settings: Settings) -> EgressPolicy:
    return EgressPolicy.of(settings.tool_egress, settings.allow_private_tool_hosts)
