"""Resume (ST5): a socket forced off at each point of a turn (before it starts, mid-deltas, during a
tool, after it completed) opens a new one and sends `resume {runId, afterSeq}`: it gets what it
missed, then the rest live; with what the first socket had, every event arrives, and once each
after dropping a seq already held (what the clients do). A socket that subscribes mid-turn joins
the running turn; keepalives go out while a tool runs."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from engram.streaming import gateway
from tests.integration import test_mcp_tools
from tests.integration.test_mcp_tools import acting_agent, connect
from tests.integration.test_stream_api import Socket

servers = test_mcp_tools.servers


def _beside(stack: Any, socket: Socket, frame: dict[str, Any]) -> dict[str, Any]:
    """A frame handled by another execution environment of the chat function (API Gateway invokes
    one per frame, concurrently; the local function object serves one event at a time)."""
    event = {"requestContext": {"eventType": "MESSAGE", "connectionId": socket.id, "stage": "live"}, "body": json.dumps(frame)}
    return json.loads(str(gateway.handle(stack.deps, event)["body"]))


def _in_background(stack: Any) -> threading.Thread:
    worker = threading.Thread(target=stack.drain_turns, daemon=True)
    worker.start()
    return worker


def _seqs(events: list[dict[str, Any]], run_id: str) -> list[int]:
    return [e["seq"] for e in events if e.get("runId") == run_id and e["type"] != "turn.keepalive"]


CUTS = {
    "before started": None,
    "mid-deltas": lambda e: e["type"] == "text.delta",
    "during a tool": lambda e: e["type"] == "tool.started",
    "after completed": lambda e: e["type"] == "turn.completed",
}


@pytest.mark.parametrize("point", list(CUTS))
def test_a_socket_forced_off_resumes_with_no_gap(stack, servers, point):
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    first, second = Socket(stack), Socket(stack)
    api = first.api
    api.cut.clear()
    run_id = first.turn(agent["id"], "use slow with 1")["runId"]
    if CUTS[point] is None:
        first.close()
        api.cut.set()
    else:
        api.cut_after[first.id] = CUTS[point]
    worker = _in_background(stack)
    assert api.cut.wait(30)
    had = _seqs(first.events, run_id)
    last = max(had, default=0)
    resumed = _beside(stack, second, {"action": "resume", "runId": run_id, "afterSeq": last})
    live = worker.is_alive()
    worker.join(60)
    assert resumed["type"] == "resumed" and resumed["runId"] == run_id and resumed["afterSeq"] == last
    got = _seqs(second.events, run_id)
    assert min(got, default=last + 1) > last  # nothing before what the first socket had
    every = had + sorted(set(got))
    assert every == list(range(1, len(every) + 1))  # no gap, none twice once a held seq is dropped
    types = {e["seq"]: e["type"] for e in first.events + second.events if e.get("runId") == run_id}
    assert types[every[-1]] == "turn.completed" and "tool.started" in types.values()
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "succeeded"
    if point == "during a tool":  # the tool takes a second: the resume came while the turn ran
        assert live and resumed["status"] in ("queued", "running")


def test_a_socket_that_subscribes_mid_turn_joins_it(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    sender, late = Socket(stack), Socket(stack)
    api = sender.api
    api.cut.clear()
    api.cut_after[sender.id] = lambda e: e["type"] == "tool.started"  # the sender goes at the tool
    run_id = sender.turn(agent["id"], "use slow with 1")["runId"]
    worker = _in_background(stack)
    assert api.cut.wait(30)
    assert _beside(stack, late, {"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"})["type"] == "subscribed"
    worker.join(60)
    types = [e["type"] for e in late.of_run(run_id)]
    assert "tool.finished" in types and types[-1] == "turn.completed"  # read once at the start before: nothing


def test_keepalives_go_out_while_a_tool_runs(stack, servers):
    stack.deps.settings = stack.deps.settings.model_copy(update={"stream_keepalive_s": 0.2})
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    socket = Socket(stack)
    run_id = socket.turn(agent["id"], "use slow with 2")["runId"]
    stack.drain_turns()
    events = socket.of_run(run_id)
    types = [e["type"] for e in events]
    during = types[types.index("tool.started") : types.index("tool.finished")]
    assert during.count("turn.keepalive") >= 2
    started = next(e["seq"] for e in events if e["type"] == "tool.started")
    assert {e["seq"] for e in events if e["type"] == "turn.keepalive" and e in events[types.index("tool.started") :]} >= {started}


def test_a_socket_that_resumes_during_a_tool_gets_the_keepalives(stack, servers):
    """Keepalives carry the last event's seq; a socket that resumed after that seq still gets them
    (or API Gateway would close it for idleness during a long tool)."""
    stack.deps.settings = stack.deps.settings.model_copy(update={"stream_keepalive_s": 0.2})
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    sender, late = Socket(stack), Socket(stack)
    api = sender.api
    api.cut.clear()
    api.cut_after[sender.id] = lambda e: e["type"] == "tool.started"  # the sender goes at the tool
    run_id = sender.turn(agent["id"], "use slow with 2")["runId"]
    worker = _in_background(stack)
    assert api.cut.wait(30)
    last = max(_seqs(sender.events, run_id))
    assert _beside(stack, late, {"action": "resume", "runId": run_id, "afterSeq": last})["type"] == "resumed"
    worker.join(60)
    types = [e["type"] for e in late.of_run(run_id)]
    assert types.count("turn.keepalive") >= 2 and types[-1] == "turn.completed"
    assert min(_seqs(late.events, run_id)) > last


def test_resume_refuses_another_users_run_and_unknown_ones(stack):
    agent = stack.agent()
    mine = Socket(stack)
    run_id = mine.turn(agent["id"], "hello")["runId"]
    stack.drain_turns()
    theirs = Socket(stack, user="bob")
    for frame in ({"action": "resume", "runId": run_id, "afterSeq": 0}, {"action": "resume", "runId": "run_nope", "afterSeq": 0}):
        answer = theirs.send(frame)
        assert answer["type"] == "error" and answer["error"]["code"] == "not_found" and answer["error"]["field"] == "runId"
    assert theirs.of_run(run_id) == []
    bad = mine.send({"action": "resume", "runId": run_id, "afterSeq": -1})
    assert bad["error"]["field"] == "afterSeq"
    replay = Socket(stack)
    done = replay.send({"action": "resume", "runId": run_id, "afterSeq": 0})
    assert done["status"] == "succeeded" and done["replayed"] == len(replay.of_run(run_id)) > 2


class _Moments:
    """The session's streams store with a hook at each step of an event's delivery: the sink
    posts to the watchers it knows, keeps the event, then reads the watchers again."""

    def __init__(self, inner: Any, hook: Any):
        self.inner, self.hook, self.seq = inner, hook, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def keep_event(self, tenant: str, run_id: str, seq: int, data: str, ttl_s: int) -> None:
        self.seq = seq
        self.hook("before the keep", seq)
        self.inner.keep_event(tenant, run_id, seq, data, ttl_s)
        self.hook("after the keep", seq)

    def watching(self, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
        found = self.inner.watching(tenant, agent_id, session_id)
        self.hook("after the read", self.seq)
        return found


@pytest.mark.parametrize("moment", ["before the keep", "after the keep", "after the read"])
@pytest.mark.parametrize("at_seq", [1, 2])
@pytest.mark.parametrize("had", ["nothing", "that event"])
def test_a_socket_that_resumes_at_any_step_of_an_events_delivery_gets_every_event_once(stack, monkeypatch, moment, at_seq, had):
    """The sink posts an event to the watchers it knows before keeping it (the first delta waits
    for no AWS call): a socket that resumes at any step of that delivery, of turn.started (1) or of
    the first delta (2), gets every event of the turn after the seq it resumed after, from the
    replay or live, and none up to it (a client that had the event from the first post and came
    back on a new socket before the second read is not sent it again)."""
    agent = stack.agent()
    sender, late = Socket(stack), Socket(stack)
    after = 0 if had == "nothing" else at_seq
    resumed: list[dict[str, Any]] = []

    def hook(step: str, seq: int) -> None:
        if step == moment and seq == at_seq and not resumed:
            resumed.append(_beside(stack, late, {"action": "resume", "runId": run_id, "afterSeq": after}))

    monkeypatch.setattr(stack.deps, "streams", _Moments(stack.deps.streams, hook))
    run_id = sender.turn(agent["id"], "hello there, tell me something")["runId"]
    stack.drain_turns()
    assert resumed and resumed[0]["type"] == "resumed"
    everything = _seqs(sender.events, run_id)
    assert everything == list(range(1, len(everything) + 1)) and len(everything) >= 3
    got = _seqs(late.events, run_id)
    assert min(got) > after and sorted(set(got)) == everything[after:]  # no gap once a held seq is dropped
    assert late.of_run(run_id)[-1]["type"] == "turn.completed"
