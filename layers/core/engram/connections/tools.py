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
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from engram.agents.models import AgentTool
from engram.aws.deadline import ContextThreadPool
from engram.aws.deadline import remaining as deadline_left
from engram.connections import health as health_book
from engram.connections.egress import EgressPolicy
from engram.connections.models import Connection, DiscoveredTool, Health, HealthError, ToolList, secret_context
from engram.connections.ports import Connections, SecretBox
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


class McpToolDeps(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def connections(self) -> Connections: ...
    @property
    def secret_box(self) -> SecretBox: ...
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
        head = f"[{entry.connection.name}]" + (f" [UNAVAILABLE: {why}; calling it only returns this error]" if why else "")
        return f"{head} {entry.tool.description}".strip()

    def owns(self, name: str) -> bool:
        return name in self.entries

    def _why_unavailable(self, connection_id: str) -> str | None:
        health = self.health.get(connection_id)
        if health is not None and health.cooling(now_iso()):
            return health_book.unavailable_reason(health)
        return self.unavailable.get(connection_id)

    def call_many(self, uses: list[dict[str, Any]], ctx: ToolContext, deadline: float) -> list[ToolOutcome]:
        from engram.connections.mcp_client import Call, McpFailure, Sessions, call_tools

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
    if sealed and connection.auth_header_name:
        headers = ((connection.auth_header_name, OPENED.get(deps.secret_box, tenant, connection.id, sealed)),)
    return Endpoint(url=connection.url, headers=headers, timeout_s=float(connection.timeout_seconds))


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


# A listing inside a turn may use at most this share of what is left of the turn, so the model
# still has time to answer when a server hangs.
LIST_SHARE_OF_TURN = 0.5
_listings: ContextThreadPool | None = None


def _listing_pool() -> ContextThreadPool:
    """Listings run here (in the turn's context, so its deadline bounds their AWS calls), so a
    turn can stop waiting for one that goes on to its own bound."""
    global _listings
    if _listings is None:
        _listings = ContextThreadPool(max_workers=8, thread_name_prefix="engram-mcp-list")
    return _listings


def _background(ctx: ToolContext) -> health_book.Write:
    """Health writes of a turn: on its pool, awaited before it returns (ToolContext.background)."""
    deps = ctx.deps

    def write(job: Callable[[], None]) -> None:
        if deps is None:
            job()
        else:
            ctx.background.append(deps.executor.submit(job))

    return write


class McpToolSource:
    """Finds an agent's MCP tools for a turn: its granted connections (one BatchGetItem, with their
    health), their cached tool lists (one more), and for a list that is missing or expired a fresh
    tools/list, bounded by the connection's timeout and part of what is left of the turn. A server
    that is down is not contacted: its cached tools are offered as unavailable."""

    def __init__(self, deps: McpToolDeps, *, list_tools: Callable[..., list[DiscoveredTool]] | None = None):
        self.deps = deps
        self._list_tools = list_tools

    def toolset(self, ctx: ToolContext) -> McpToolSet | None:
        grants: list[AgentTool] = list(ctx.agent.tools)
        if not grants:
            return None
        tenant = ctx.tenant
        ids = [grant.connection_id for grant in grants]
        found = self.deps.connections.get_many_with_secrets(tenant, ids)
        cached = self.deps.connections.tools(tenant, ids)
        toolset = McpToolSet(self.deps, tenant, write=_background(ctx))
        now, at = int(time.time()), now_iso()
        lists: dict[str, ToolList | None] = {}
        listings: dict[str, _Listing] = {}
        for connection_id, (connection, sealed) in found.items():
            toolset.health[connection_id] = connection.health
            listed = lists[connection_id] = cached.get(connection_id)
            if connection.health.cooling(at):
                toolset.unavailable[connection_id] = health_book.unavailable_reason(connection.health)
            elif listed is None or listed.expires_at <= now or connection.health.state == "down":
                # missing, expired, or a down server's cool-down is over: this listing probes it
                listings[connection_id] = self._start_listing(toolset, connection, sealed)
        for connection_id, listing in listings.items():  # all at once: one hanging server delays no other
            lists[connection_id] = self._finish_listing(toolset, found[connection_id][0], listing, stale=lists[connection_id])
        for grant in grants:
            if grant.connection_id not in found:
                continue  # deleted meanwhile: its grant is being removed from the agent
            connection, sealed = found[grant.connection_id]
            listed = lists[connection.id]
            if listed is None:
                continue
            toolset.lists[connection.id] = listed
            allowed = set(grant.allow) if grant.allow is not None else None
            for tool in listed.tools:
                if allowed is None or tool.name in allowed:
                    toolset.entries[tool_name(connection.name, tool.name)] = _Entry(connection, tool, sealed)
        return toolset if toolset.entries else None

    def _start_listing(self, toolset: McpToolSet, connection: Connection, sealed: str | None) -> _Listing:
        """A fresh listing on the listing pool, bounded by the connection's timeout and a share of
        what is left of the turn, or the one another turn of this container has under way. After a
        failure a turn waits for it at most RETRY_WAIT_S, and not at all for one already under way:
        it goes on to its bound and records what it finds for the next turns."""
        left = deadline_left()
        bound = float(connection.timeout_seconds)
        if left is not None:
            bound = max(0.0, min(bound, left * LIST_SHARE_OF_TURN))
        failed_lately = connection.health.consecutive_failures > 0
        now = time.monotonic()
        key = (toolset.tenant, connection.id, connection.url)
        with _in_flight_lock:
            running = _in_flight.get(key)
            if running is not None and not running.done():
                return _Listing(running, now if failed_lately else now + bound + _LISTING_GRACE_S)
            job = _listing_pool().submit(
                refresh_tools,
                self.deps,
                toolset.tenant,
                connection,
                sealed,
                list_tools=self._list_tools,
                deadline=now + bound,
                write=toolset.write,
            )
            _in_flight[key] = job
        job.add_done_callback(lambda done: _forget_listing(key, done))
        wait = min(bound + _LISTING_GRACE_S, health_book.RETRY_WAIT_S) if failed_lately else bound + _LISTING_GRACE_S
        return _Listing(job, now + wait)

    def _finish_listing(
        self, toolset: McpToolSet, connection: Connection, listing: _Listing, *, stale: ToolList | None
    ) -> ToolList | None:
        """The fresh list; on failure the last list (if any), its tools marked unavailable."""
        try:
            listed, health = listing.job.result(timeout=max(0.0, listing.wait_until - time.monotonic()))
        except FuturesTimeout:
            toolset.unavailable[connection.id] = (
                f"its server failed lately ({_last_error(connection.health)}) and has not listed its tools again yet"
            )
            return stale
        except Exception as err:
            logger.warning(
                "a connection's tools could not be listed; its last list is used if there is one",
                extra={"connection": connection.id, "error": repr(err)},
            )
            return stale
        toolset.health[connection.id] = health
        if isinstance(listed, ToolList):
            return listed
        if health_book.counts(listed.code):
            toolset.unavailable[connection.id] = f"its server could not list its tools just now ({listed.code}: {listed.message})"
        return stale


_LISTING_GRACE_S = 0.25  # past its bound, for the listing to end itself and note the outcome
FROZEN_SLACK_S = 2.0  # a listing that times out this long past its bound was frozen, not refused
# Listings under way in this container, by (tenant, connection, url): turns share them.
_in_flight: dict[tuple[str, str, str], Future[tuple[ToolList | HealthError, Health]]] = {}
_in_flight_lock = threading.Lock()


def _forget_listing(key: tuple[str, str, str], done: Future[tuple[ToolList | HealthError, Health]]) -> None:
    with _in_flight_lock:
        if _in_flight.get(key) is done:
            del _in_flight[key]


@dataclass(frozen=True)
class _Listing:
    job: Future[tuple[ToolList | HealthError, Health]]
    wait_until: float  # time.monotonic(): the turn goes on without it after this


def _last_error(health: Health) -> str:
    return f"{health.last_error.code}: {health.last_error.message}" if health.last_error else "failed"


def refresh_tools(
    deps: McpToolDeps,
    tenant: str,
    connection: Connection,
    sealed: str | None,
    *,
    list_tools: Callable[..., list[DiscoveredTool]] | None = None,
    deadline: float | None = None,
    write: health_book.Write = health_book.write_now,
) -> tuple[ToolList | HealthError, Health]:
    """Lists the server's tools now (by `deadline`, time.monotonic(), if given), caches the list and
    notes the server's health: the list, or the failure; and the health to go on with. Raises only
    when the stored auth value cannot be opened."""
    from engram.connections.mcp_client import McpFailure, failure_of
    from engram.connections.mcp_client import list_tools as sdk_list_tools

    settings = deps.settings
    endpoint = endpoint_of(deps, tenant, connection, sealed)
    try:
        tools = (list_tools or sdk_list_tools)(
            endpoint,
            policy_of(settings),
            max_tools=settings.tool_list_max_tools,
            max_schema_bytes=settings.tool_schema_max_bytes,
            max_bytes=settings.tool_response_max_bytes,
            deadline=deadline,
        )
        collisions = name_collisions(connection.name, tools)
        if collisions:
            first, second, name = collisions[0]
            raise McpFailure(
                "tool_name_collision",
                f"tools {first!r} and {second!r} would both be named {name!r} (names are made safe and cut to"
                f" {_NAME_MAX} characters); rename one on the server or give the connection a shorter name",
            )
    except Exception as err:
        problem = failure_of(err)
        failure = HealthError(code=problem.code, message=problem.message)
        if problem.code == "timeout" and deadline is not None and time.monotonic() > deadline + FROZEN_SLACK_S:
            # Ended long past its bound: the container was frozen meanwhile (Lambda between two
            # invocations, a listing the turn did not wait for), which says nothing of the server.
            logger.info("a listing outlived its bound; its timeout is not counted", extra={"connection": connection.id})
            return failure, connection.health
        return failure, health_book.note(deps.connections, tenant, connection, connection.health, failure, write)
    listed = ToolList(tools=tools, listed_at=now_iso(), expires_at=int(time.time()) + settings.tool_list_ttl_s)
    deps.connections.put_tools(tenant, connection.id, listed)
    return listed, health_book.note(deps.connections, tenant, connection, connection.health, None, write)
