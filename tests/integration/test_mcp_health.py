"""Bounded and self-healing tools (TL8): a server that dies mid-conversation is remembered on its
connection's row (shared by every turn of every agent), skipped for a cool-down with its tools
offered as unavailable, noticed when it comes back; a hanging tools/list costs a turn part of its
budget, never the answer; the health shows in `GET /api/connections/{id}`; a lost or refused
health write never breaks a turn. Real MCP servers on loopback (tests/mcp_servers.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from engram.connections.models import Health
from engram.engine.providers.offline import OfflineProvider
from engram.kernel.ids import tenant_key
from tests.faults import LOST, REFUSED, STALL, inject
from tests.integration.test_mcp_tools import acting_agent, connect
from tests.mcp_servers import McpServers, Mortal


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.hanging.hang = False
    running.running.stop()


@pytest.fixture
def mortal() -> Iterator[Mortal]:
    server = Mortal.start()
    yield server
    server.stop()


class Recording:
    """The offline model, keeping the tools each request offered."""

    name = "offline"

    def __init__(self, registry: Any):
        self.inner = OfflineProvider(registry.offline_intents)
        self.tools: list[dict[str, dict[str, Any]]] = []

    def complete(self, **kw: Any) -> Any:
        self.tools.append({str(t["name"]): t for t in kw.get("tools") or []})
        return self.inner.complete(**kw)


def health_of(stack: Any, connection: dict[str, Any]) -> dict[str, Any]:
    r = stack.call("GET", f"/api/connections/{connection['id']}")
    assert r.status == 200, r.body
    return r.data["health"]  # type: ignore[no-any-return]


def only_call(reply: Any) -> dict[str, Any]:
    assert reply.status == 200, reply.body
    (call,) = reply.data["toolCalls"]
    return call  # type: ignore[no-any-return]


def test_a_new_connection_has_unknown_health_and_a_new_url_forgets_the_old_one(stack, servers):
    conn = connect(stack, servers, "market")
    assert conn["health"] == {
        "state": "unknown",
        "consecutiveFailures": 0,
        "lastSuccessAt": None,
        "lastErrorAt": None,
        "lastError": None,
        "retryAfter": None,
    }
    down = stack.call("POST", "/api/connections", body={"name": "down", "url": "http://127.0.0.1:9/mcp"}).data
    assert stack.call("POST", f"/api/connections/{down['id']}/test").data["ok"] is False
    failed = health_of(stack, down)
    assert failed["state"] == "degraded" and failed["lastError"]["code"] == "unreachable" and failed["lastErrorAt"]
    moved = stack.call("PATCH", f"/api/connections/{down['id']}", body={"url": servers.url("sample")})
    assert moved.data["health"]["state"] == "unknown"
    assert stack.call("POST", f"/api/connections/{down['id']}/test").data["ok"] is True
    assert health_of(stack, down)["state"] == "healthy"
    listed = stack.call("GET", "/api/connections").data["items"]
    assert {c["name"]: c["health"]["state"] for c in listed} == {"market": "unknown", "down": "healthy"}


def test_a_server_that_dies_is_skipped_by_every_turn_and_noticed_when_it_comes_back(stack, mortal):
    model = Recording(stack.deps.registry)
    stack.deps.provider_override = model
    conn = stack.call("POST", "/api/connections", body={"name": "market", "url": mortal.url}).data
    first, second = acting_agent(stack, conn), acting_agent(stack, conn)
    assert "97250.5" in only_call(stack.say(first["id"], "use lookup_price for BTC"))["result"]
    healthy = health_of(stack, conn)
    assert healthy["state"] == "healthy" and healthy["lastSuccessAt"] and healthy["consecutiveFailures"] == 0

    mortal.stop()  # dies mid-conversation
    assert only_call(stack.say(first["id"], "use lookup_price for BTC"))["error"] == "unreachable"
    assert health_of(stack, conn)["state"] == "degraded"
    # Another agent's turn meets the second failure: the server is down for everyone.
    assert only_call(stack.say(second["id"], "use lookup_price for ETH"))["error"] == "unreachable"
    down = health_of(stack, conn)
    assert down["state"] == "down" and down["consecutiveFailures"] == 2
    assert down["lastError"]["code"] == "unreachable" and down["retryAfter"] > down["lastErrorAt"]

    # Back up, but still cooling down: no turn contacts it, its tools are offered as unavailable
    # with the reason, and a call answers at once with that reason.
    mortal.restart()
    call = only_call(stack.say(first["id"], "use lookup_price for SOL"))
    assert call["isError"] is True and call["error"] == "unavailable" and "durationMs" not in call
    assert "unreachable" in call["result"] and down["retryAfter"] in call["result"]
    offered = model.tools[-1]["mcp__market__lookup_price"]["description"]
    assert offered.startswith("[market] [UNAVAILABLE: its server failed 2 times in a row")
    assert health_of(stack, conn) == down  # skipped calls change nothing

    # The cool-down passes (the row says so): the next turn probes the server, finds it back,
    # and its tools work again; the health is reset (the last error stays on view).
    past = Health.model_validate({**down, "retryAfter": "2000-01-01T00:00:00.000Z"})
    assert stack.deps.connections.record_health(tenant_key("alice"), conn["id"], past, seen=2)
    back = only_call(stack.say(second["id"], "use lookup_price for SOL"))
    assert "182.3" in back["result"] and "isError" not in back
    assert "UNAVAILABLE" not in model.tools[-1]["mcp__market__lookup_price"]["description"]
    healed = health_of(stack, conn)
    assert healed["state"] == "healthy" and healed["consecutiveFailures"] == 0 and healed["retryAfter"] is None
    assert healed["lastError"]["code"] == "unreachable" and healed["lastSuccessAt"] > down["lastErrorAt"]


def test_a_hanging_tool_list_never_costs_the_answer_and_the_run_is_recorded(stack, servers):
    # A 60 s timeout in a 4 s sync budget: the listing gets part of what is left of the turn.
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": 4.0})
    hanging = connect(stack, servers, "hanging", "hanging", timeoutSeconds=60)
    market = connect(stack, servers, "market")
    agent = acting_agent(stack, hanging, market)
    r = stack.say(agent["id"], "use lookup_price for SOL")
    assert "182.3" in only_call(r)["result"]
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "succeeded"
    failed = health_of(stack, hanging)
    assert failed["state"] == "degraded" and failed["lastError"]["code"] == "timeout"

    # The next turn waits for it about a second; its listing goes on without the turn and
    # records the second failure: the server is down, and later turns do not wait for it.
    assert stack.say(agent["id"], "use lookup_price for ETH").status == 200
    for _ in range(100):
        if health_of(stack, hanging)["state"] == "down":
            break
        time.sleep(0.1)
    assert health_of(stack, hanging)["state"] == "down"
    r = stack.say(agent["id"], "use lookup_price for BTC")
    assert "97250.5" in only_call(r)["result"]
    assert stack.call("GET", f"/api/runs/{r.data['runId']}").data["status"] == "succeeded"


@pytest.mark.parametrize("fault", [LOST, REFUSED, STALL])
def test_a_lost_refused_or_stalled_health_write_never_breaks_the_turn(stack, servers, fault):
    down = stack.call("POST", "/api/connections", body={"name": "down", "url": "http://127.0.0.1:9/mcp"}).data
    market = connect(stack, servers, "market")
    agent = acting_agent(stack, market, down)
    assert stack.call("POST", f"/api/connections/{market['id']}/test").data["ok"] is True
    stack.call("PATCH", f"/api/connections/{market['id']}", body={"url": "http://127.0.0.1:9/mcp"})
    with inject() as faults:
        faults.add(
            "dynamodb", "UpdateItem", fault, times=5, seconds=1.0, when=lambda p: p.get("UpdateExpression") == "SET #h = :h"
        )
        r = stack.say(agent["id"], "use lookup_price for BTC")
    assert only_call(r)["error"] == "unreachable"
    assert ("dynamodb", "UpdateItem", fault) in faults.injected
    # One consistent state: a lost write was applied once (its retry found the count moved on),
    # a refused one left the row as it was, a stalled one landed late (the turn awaited it).
    expected = {LOST: ("degraded", 1), REFUSED: ("unknown", 0), STALL: ("degraded", 1)}[fault]
    health = health_of(stack, market)
    assert (health["state"], health["consecutiveFailures"]) == expected
    again = stack.say(agent["id"], "use lookup_price for BTC")
    assert only_call(again)["error"] == "unreachable"
    assert health_of(stack, market)["consecutiveFailures"] == expected[1] + 1


def test_a_call_that_outlasts_the_sync_budget_fails_the_turn_in_time_and_the_run_says_why(stack, servers):
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": 4.0})
    conn = connect(stack, servers, "faulty", "faulty", timeoutSeconds=60)
    agent = acting_agent(stack, conn)
    r = stack.say(agent["id"], "use slow with 30")
    assert r.status == 504 and r.error["code"] == "turn_timeout" and r.error["runId"]
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "turn_timeout"
    assert health_of(stack, conn)["lastError"]["code"] == "timeout"
    assert stack.say(agent["id"], "hello again").status == 200
