"""Where a turn's MCP tools come from (TL2, TL8): the tool source the engine asks per turn lists
each granted connection's tools (cached, refreshed when stale, every listing bounded by the
connection's timeout and a share of what is left of the turn, run in parallel and shared by the
turns of one container), notes each server's health, and hands the engine an `McpToolSet`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engram.agents.models import AgentTool
from engram.aws.deadline import ContextThreadPool
from engram.aws.deadline import remaining as deadline_left
from engram.connections import health as health_book
from engram.connections.models import Connection, DiscoveredTool, Health, HealthError, ToolList
from engram.engine.tools import ToolContext
from engram.kernel.model import now_iso
from engram.kernel.observability import logger

if TYPE_CHECKING:
    pass
from engram.connections.tools import (
    _NAME_MAX,
    McpToolDeps,
    McpToolSet,
    _Entry,
    endpoint_of,
    name_collisions,
    policy_of,
    tool_name,
)

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
    from engram.connections.mcp_client import list_tools as sdk_list_tools
    from engram.connections.mcp_http import McpFailure, failure_of

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
