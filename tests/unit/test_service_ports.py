"""Services take the ports they use, not the function's whole `Stores` container (issue 33, item 3).

A ratchet on the source: the feature modules (layer 6: services, tools, prompt sections; not the
HTTP kernel, which builds the container) that import engram.wiring.stores may only become fewer.
Routes receive the container (`Deps`) and hand each use case its ports; tools and prompt sections
reach it through `stores_of(ctx)`, since the engine hands them its ToolDeps only. Remove a module
from STILL_IMPORTING once it no longer imports the container.
"""

from __future__ import annotations

from tests.unit.test_import_layers import NOT_FEATURES, _edges, layer, package

STORES = "engram.wiring.stores"
STILL_IMPORTING = {
    # the tools and prompt sections: `stores_of(ctx)`
    "engram.cards.tools",
    "engram.memory.section",
    "engram.memory.tools",
    "engram.recall.tools",
    "engram.run_memory.tools",
    # the MCP server's handler: its tools are use cases called with the request's stores
    "engram.mcp_server.server",
}
# Changed over: these take the ports they use (and a feature's protocol of them where they are four
# or more, e.g. agents.ports.AgentStores), and must not go back to the container.
CHANGED_OVER = {
    "engram.account.service",
    "engram.agents.service",
    "engram.apikeys.service",
    "engram.approvals.service",
    "engram.cards.service",
    "engram.cards.policy",
    "engram.connections.service",
    "engram.conversations.service",
    "engram.facts.service",
    "engram.memory.service",
    "engram.recall.index",
    "engram.recall.service",
    "engram.run_memory.learnings",
    "engram.run_memory.store",
    "engram.runs.active_memory",
    "engram.runs.council_wait",
    "engram.runs.service",
    "engram.streaming.closing",
    "engram.streaming.service",
    "engram.usage.service",
}


def _importing(edges: dict[str, set[str]]) -> set[str]:
    return {m for m, targets in edges.items() if layer(m) == 6 and package(m) not in NOT_FEATURES and STORES in targets}


def test_no_more_feature_modules_import_the_stores_container():
    importing = _importing(_edges())
    assert importing <= STILL_IMPORTING, f"new importers of {STORES}: {sorted(importing - STILL_IMPORTING)}"
    assert importing.isdisjoint(CHANGED_OVER)


def test_the_ratchet_reports_a_service_that_takes_the_container_again():
    # A guard for the rule itself: cards.service importing Stores again is reported.
    edges = {module: set(targets) for module, targets in _edges().items()}
    assert set(edges) >= CHANGED_OVER  # every name is a module the walk found
    edges["engram.cards.service"].add(STORES)
    assert _importing(edges) - STILL_IMPORTING == {"engram.cards.service"}
