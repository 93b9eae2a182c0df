"""A watched turn's events (ST2): in order, numbered, text coalesced and adding up to the stored
reply, tool calls announced around an MCP call; a failure is one turn.failed; a turn nobody
watches streams nothing."""

from __future__ import annotations

from typing import Any

from engram.conversations.chat import chat_plan
from engram.engine import events as turn_events
from engram.engine.events import TurnEvents
from engram.engine.turn import run_turn
from engram.kernel.errors import TurnFailed
from engram.kernel.ids import tenant_key
from tests.integration import test_mcp_tools
from tests.integration.test_mcp_tools import acting_agent, connect

servers = test_mcp_tools.servers  # the real MCP servers on loopback, once per module


class Recorded:
    """A sink that keeps what it is handed."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.closed = False

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def close(self) -> None:
        self.closed = True

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


def watched_turn(stack: Any, agent_id: str, message: str, run_id: str = "run_watched") -> tuple[Recorded, Any]:
    sink = Recorded()
    plan = chat_plan(stack.deps, agent_id, "dashboard", run_id=run_id)
    plan.events = TurnEvents(sink, run_id, clock=lambda: 0.0)  # text coalesces by size alone here
    try:
        outcome = run_turn(stack.deps, tenant_key("alice"), message, plan)
    except TurnFailed as err:
        outcome = err
    return sink, outcome


def test_a_streamed_turn_arrives_in_order_and_its_deltas_are_the_stored_reply(stack):
    agent = stack.agent()
    sink, outcome = watched_turn(stack, agent["id"], "tell me something " + "long " * 120)
    assert sink.types()[0] == "turn.started" and sink.types()[-1] == "turn.completed" and sink.closed
    assert set(sink.types()[1:-1]) == {"text.delta"}
    assert [e["seq"] for e in sink.events] == list(range(1, len(sink.events) + 1))
    assert {e["runId"] for e in sink.events} == {"run_watched"}
    deltas = [e["text"] for e in sink.events if e["type"] == "text.delta"]
    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"][-1]["content"][0]["text"]
    assert "".join(deltas) == outcome.reply == stored
    # coalesced: a reply of ~700 characters (offline: 24 a piece) is a few pushes, not dozens
    assert len(deltas) <= len(stored) // turn_events.COALESCE_CHARS + 2
    done = sink.events[-1]
    assert done["reply"] == stored and done["sessionId"] == "dashboard" and done["usage"]["inputTokens"] > 0


def test_tool_events_surround_an_mcp_call(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "market"))
    sink, outcome = watched_turn(stack, agent["id"], "use lookup_price for BTC")
    types = sink.types()
    started, finished = types.index("tool.started"), types.index("tool.finished")
    assert types[0] == "turn.started" and started < finished and types[-1] == "turn.completed"
    call = sink.events[started]
    assert call["name"] == "mcp__market__lookup_price" and call["input"] == {"symbol": "BTC"}
    assert sink.events[finished]["toolUseId"] == call["toolUseId"] and sink.events[finished]["isError"] is False
    # the final round's deltas are the reply; the tool round's own words came before the call
    final_round = max(e["round"] for e in sink.events if e["type"] == "text.delta")
    assert "".join(e["text"] for e in sink.events if e["type"] == "text.delta" and e["round"] == final_round) == outcome.reply
    assert sink.events[-1]["toolCalls"][0]["name"] == "mcp__market__lookup_price"


def test_a_failed_turn_ends_in_one_turn_failed_with_the_error_envelope(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": 0.01})
    agent = stack.agent()
    sink, outcome = watched_turn(stack, agent["id"], "hello")
    assert isinstance(outcome, TurnFailed)
    assert sink.types()[-1] == "turn.failed" and sink.types().count("turn.failed") == 1 and sink.closed
    assert sink.events[-1]["error"]["code"] == "turn_timeout" and sink.events[-1]["error"]["runId"] == "run_watched"


def test_a_sink_that_raises_never_fails_the_turn(stack):
    class Broken(Recorded):
        def emit(self, event: dict[str, Any]) -> None:
            raise RuntimeError("gone")

    agent = stack.agent()
    plan = chat_plan(stack.deps, agent["id"], "dashboard", run_id="run_broken")
    plan.events = TurnEvents(Broken(), "run_broken")
    assert "hello" in run_turn(stack.deps, tenant_key("alice"), "hello", plan).reply
