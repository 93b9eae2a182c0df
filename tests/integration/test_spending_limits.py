"""Spending limits (TL10) and the usage totals they read (OB4): a limit reached mid-turn, a
heartbeat skipped over its limit, toolCallsPerTurn, the person's limits, and the breakdowns of
GET /api/usage equal to the sum of the rows, also after injected faults.

The model is the real anthropic client with a mocked HTTP transport, so every call is priced
(Sonnet: 1,000 input, 100 output, 2,000 cache read, 500 cache write tokens = $0.006975)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from engram.engine.providers.anthropic_provider import AnthropicProvider
from tests.fakes.claude import sse
from tests.faults import LOST, LOST_FOR_GOOD, REFUSED, Faults
from tests.integration.test_turns_anthropic import _message  # Sonnet 4.6 with the figures above

CALL_USD = 0.006975
MODEL = "claude-sonnet-4-6"


def _tool_use(n: int = 1) -> dict[str, Any]:
    uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": "get_current_time", "input": {}} for i in range(n)]
    return _message([{"type": "text", "text": "Checking."}, *uses], stop="tool_use")


class Model:
    """The Anthropic API on a mocked transport: each request gets the next answer (the last one
    repeats); `requests` counts what was sent."""

    def __init__(self, stack: Any, *answers: dict[str, Any]):
        self.answers = list(answers) or [_message([{"type": "text", "text": "Done."}])]
        self.requests = 0
        settings = stack.deps.settings.model_copy(
            update={"anthropic_api_key": "sk-test", "model_provider": "anthropic", "model_max_retries": 0}
        )
        stack.deps.provider_override = AnthropicProvider(
            settings, http_client=httpx2.Client(transport=httpx2.MockTransport(self))
        )

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        streamed = json.loads(request.content).get("stream")  # a watched turn streams (ST2)
        answer = self.answers[min(self.requests, len(self.answers) - 1)]
        self.requests += 1
        return sse(answer) if streamed else httpx2.Response(200, json=answer)


def _usage(stack: Any, user: str = "alice", **query: str) -> dict[str, Any]:
    r = stack.call("GET", "/api/usage", user=user, query=query)
    assert r.status == 200, r.body
    return r.data


def _all_rows(stack: Any, user: str = "alice", **query: str) -> list[dict[str, Any]]:
    rows, token = [], None
    while True:
        page = _usage(stack, user, **query, **({"nextToken": token} if token else {}))
        rows += page["items"]
        token = page["nextToken"]
        if not token:
            return rows


def _session(stack: Any, agent_id: str) -> dict[str, Any]:
    return stack.call("GET", f"/api/agents/{agent_id}/sessions/dashboard").data


FIGURES = ("costUsd", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "cacheSavingsUsd")


def _close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-7


def assert_breakdown_is_the_sum_of_the_rows(stack: Any, user: str = "alice") -> None:
    """Every figure of the breakdown (totals, per day, model, kind, agent) equals the sum of the
    rows it stands for; a row's kind is its run's (or extraction/summary, by its session key)."""
    rows = _all_rows(stack, user)
    kinds: dict[str, str] = {}
    for row in rows:
        if row["runId"] not in kinds:
            run = stack.call("GET", f"/api/runs/{row['runId']}", user=user).data
            kinds[row["runId"]] = run["kind"]

    def kind_of(row: dict[str, Any]) -> str:
        if row["id"].rsplit("-", 1)[-1].startswith("x"):
            return "extraction"
        if row["id"].rsplit("-", 1)[-1].startswith("c"):
            return "summary"
        return kinds[row["runId"]]

    expected: dict[str, dict[str, dict[str, float]]] = {
        d: defaultdict(lambda: defaultdict(float)) for d in ("day", "model", "kind", "agentId", "all")
    }
    for row in rows:
        for dimension, key in (
            ("day", row["createdAt"][:10]),
            ("model", row["model"]),
            ("kind", kind_of(row)),
            ("agentId", row["agentId"]),
            ("all", "all"),
        ):
            for figure in FIGURES:
                expected[dimension][key][figure] += row[figure]
    breakdown = _usage(stack, user)["breakdown"]
    for figure in FIGURES:
        assert _close(breakdown["totals"][figure], expected["all"]["all"][figure]), figure
        for entries, dimension, name in (
            (breakdown["days"], "day", "date"),
            (breakdown["models"], "model", "model"),
            (breakdown["kinds"], "kind", "kind"),
            (breakdown["agents"], "agentId", "agentId"),
        ):
            got = {e[name]: e[figure] for e in entries if any(e[f] for f in FIGURES)}
            want = {k: v[figure] for k, v in expected[dimension].items() if any(v[f] for f in FIGURES)}
            assert set(got) == set(want), (dimension, got, want)
            assert all(_close(got[k], want[k]) for k in want), (dimension, figure, got, want)


# ---- limits --------------------------------------------------------------------------------------
def test_a_limit_reached_mid_turn_stops_before_the_second_call_records_the_first_and_leaves_the_session(stack):
    model = Model(stack, _tool_use(), _message([{"type": "text", "text": "It is noon."}]))
    agent = stack.agent(model=MODEL, limits={"dailyCostUsd": 0.01})
    assert agent["limits"] == {"dailyCostUsd": 0.01}

    r = stack.say(agent["id"], "what time is it?")

    assert r.status == 402, r.body
    error = r.error
    assert error["code"] == "limit_exceeded" and error["runId"]
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert error["limit"] == {
        "name": "dailyCostUsd",
        "scope": "agent",
        "value": 0.01,
        "spentUsd": CALL_USD,
        "resetsAt": f"{tomorrow}T00:00:00Z",
    }
    assert model.requests == 1  # the second call was never made
    run = stack.call("GET", f"/api/runs/{error['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "limit_exceeded"
    assert run["usage"]["costUsd"] == CALL_USD and run["error"]["limit"]["name"] == "dailyCostUsd"
    session = _session(stack, agent["id"])
    assert session["messages"] == [] and session.get("revision", 0) == 0
    usage = _usage(stack, agentId=agent["id"])
    assert [row["runId"] for row in usage["items"]] == [run["id"]]
    assert usage["breakdown"]["totals"]["costUsd"] == CALL_USD
    assert usage["breakdown"]["spending"]["todayUsd"] == CALL_USD
    assert usage["breakdown"]["spending"]["limits"] == {"dailyCostUsd": 0.01}

    # The next turn starts under the limit: its first call is made (and passes the limit by its own cost).
    again = stack.say(agent["id"], "and now?")
    assert again.status == 200 and model.requests == 2, again.body
    third = stack.say(agent["id"], "and now?")  # refused before any call
    assert third.status == 402 and third.error["limit"]["spentUsd"] == round(2 * CALL_USD, 8) and model.requests == 2
    assert_breakdown_is_the_sum_of_the_rows(stack)


def test_a_heartbeat_over_its_limit_is_skipped_before_any_model_call_and_recorded(stack):
    model = Model(stack)
    agent = stack.agent(model=MODEL, schedule="rate(1 hour)", defaultPrompt="Check in.", limits={"monthlyCostUsd": 0.005})
    assert stack.say(agent["id"], "hello").status == 200  # $0.006975: past the monthly limit now
    calls = model.requests

    out = stack.fire(agent["id"])

    assert out["status"] == "skipped", out
    assert model.requests == calls
    run = stack.call("GET", f"/api/runs/{out['runId']}").data
    assert run["kind"] == "heartbeat" and run["status"] == "failed"
    assert run["error"]["code"] == "limit_exceeded" and run["error"]["skipped"] is True
    assert run["error"]["limit"]["name"] == "monthlyCostUsd" and run["error"]["limit"]["resetsAt"].endswith("-01T00:00:00Z")
    assert run["usage"]["costUsd"] == 0
    assert _session(stack, agent["id"])["messageCount"] == 2  # the chat turn only
    # A manual run is skipped the same way.
    manual = stack.run_now(agent["id"])
    assert manual["status"] == "failed" and manual["error"]["code"] == "limit_exceeded" and model.requests == calls


def test_tool_calls_per_turn_stops_before_running_calls_past_the_cap(stack):
    model = Model(stack, _tool_use(1), _tool_use(2), _message([{"type": "text", "text": "Done."}]))
    agent = stack.agent(model=MODEL, limits={"toolCallsPerTurn": 2})

    r = stack.say(agent["id"], "what time is it, twice?")

    assert r.status == 402 and r.error["code"] == "limit_exceeded", r.body
    assert r.error["limit"] == {"name": "toolCallsPerTurn", "scope": "agent", "value": 2}
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert [c["name"] for c in run["toolCalls"]] == ["get_current_time"]  # the second answer's two never ran
    assert run["usage"]["costUsd"] == round(2 * CALL_USD, 8) and model.requests == 2
    assert _session(stack, agent["id"])["messages"] == []
    breakdown = _usage(stack)["breakdown"]
    assert breakdown["totals"]["toolCalls"] == 1 and breakdown["kinds"][0]["toolCalls"] == 1


def test_the_persons_limits_cover_all_their_agents(stack):
    model = Model(stack)
    assert stack.call("GET", "/api/me").data == {"name": None, "limits": {}}
    r = stack.call("PATCH", "/api/me", body={"limits": {"dailyCostUsd": 0.01}})
    assert r.status == 200 and r.data == {"name": None, "limits": {"dailyCostUsd": 0.01}}, r.body
    assert stack.call("GET", "/api/me").data["limits"] == {"dailyCostUsd": 0.01}
    first, second = stack.agent(model=MODEL), stack.agent(model=MODEL, name="Bea")
    assert stack.say(first["id"], "hi").status == 200
    assert stack.say(second["id"], "hi").status == 200  # $0.006975 recorded: under $0.01
    refused = stack.say(second["id"], "hi again")  # $0.01395 recorded by the two agents
    assert refused.status == 402 and refused.error["limit"]["scope"] == "user" and model.requests == 2
    # The name stays when only the limits change, and null removes them.
    assert stack.call("PATCH", "/api/me", body={"name": "Caroline"}).data["limits"] == {"dailyCostUsd": 0.01}
    assert stack.call("PATCH", "/api/me", body={"limits": None}).data == {"name": "Caroline", "limits": {}}
    assert stack.say(second["id"], "hi").status == 200


@pytest.mark.parametrize(
    "limits",
    [
        {"dailyCostUsd": 0},
        {"dailyCostUsd": -1},
        {"monthlyCostUsd": 1e9},
        {"dailyCostUsd": "5"},
        {"toolCallsPerTurn": 0},
        {"toolCallsPerTurn": 1.5},
        {"toolCallsPerTurn": 10_000},
        {"weeklyCostUsd": 5},
    ],
)
def test_bad_limits_are_a_400_naming_the_field(stack, limits):
    r = stack.call("POST", "/api/agents", body={"name": "A", "limits": limits})
    assert r.status == 400 and r.error["field"].startswith("limits."), r.body
    me = stack.call("PATCH", "/api/me", body={"limits": limits})
    assert me.status == 400 and me.error["field"].startswith("limits."), me.body
    assert stack.call("GET", "/api/me").data["limits"] == {}


def test_an_agents_limits_are_replaced_and_removed_with_patch(stack):
    agent = stack.agent(limits={"dailyCostUsd": 1, "toolCallsPerTurn": 5})
    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"limits": {"monthlyCostUsd": 20}})
    assert r.status == 200 and r.data["limits"] == {"monthlyCostUsd": 20}, r.body
    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"limits": None})
    assert r.status == 200 and r.data["limits"] is None


# ---- the usage totals and breakdowns ---------------------------------------------------------------
def test_breakdowns_equal_the_sum_of_the_rows_with_extraction_and_runs(stack):
    agent = stack.agent(agentMemory=True)  # the offline model: tokens, no cost
    other = stack.agent(name="Bea", defaultPrompt="Check in.")
    for text in ("I prefer tea.", "Our deploy day is Tuesday."):
        assert stack.say(agent["id"], text).status == 200
    _drain_extractions(stack)
    assert stack.run_now(other["id"])["status"] == "succeeded"
    breakdown = _usage(stack)["breakdown"]
    assert {k["kind"] for k in breakdown["kinds"]} >= {"chat", "manual"}
    assert len(breakdown["days"]) == 30 and breakdown["days"][-1]["date"] == datetime.now(UTC).date().isoformat()
    assert_breakdown_is_the_sum_of_the_rows(stack)
    mine = _usage(stack, agentId=other["id"])["breakdown"]
    assert "agents" not in mine and [k["kind"] for k in mine["kinds"]] == ["manual"]


def _drain_extractions(stack: Any) -> None:
    from local.workers import Workers

    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)


def test_cache_savings_are_what_the_cached_tokens_would_have_cost_uncached(stack):
    Model(stack)
    agent = stack.agent(model=MODEL)
    assert stack.say(agent["id"], "hi").status == 200
    # 2,000 reads save 0.9 x $3/M; 500 five-minute writes cost 0.25 x $3/M more.
    saved = round((2000 * (3.0 - 0.3) - 500 * (3.75 - 3.0)) / 1e6, 8)
    breakdown = _usage(stack)["breakdown"]
    assert breakdown["totals"]["cacheSavingsUsd"] == saved
    assert breakdown["models"] == [
        {
            "model": MODEL,
            "costUsd": CALL_USD,
            "inputTokens": 1000,
            "outputTokens": 100,
            "cacheReadTokens": 2000,
            "cacheWriteTokens": 500,
            "cacheSavingsUsd": saved,
        }
    ]


def test_a_date_range_and_its_bad_forms(stack):
    r = stack.call("GET", "/api/usage", query={"from": "2026-01-01", "to": "2026-01-03"})
    assert r.status == 200 and [d["date"] for d in r.data["breakdown"]["days"]] == ["2026-01-01", "2026-01-02", "2026-01-03"]
    for query, field in (
        ({"from": "2026-01-05", "to": "2026-01-03"}, "from"),
        ({"from": "2024-01-01", "to": "2026-01-03"}, "from"),
        ({"from": "2026-02-30"}, "from"),
        ({"to": "yesterday"}, "to"),
    ):
        bad = stack.call("GET", "/api/usage", query=query)
        assert bad.status == 400 and bad.error["field"] == field, (query, bad.body)


def test_another_users_usage_is_invisible(stack):
    Model(stack)
    agent = stack.agent(model=MODEL)
    assert stack.say(agent["id"], "hi").status == 200
    bob = _usage(stack, "bob")
    assert bob["items"] == [] and bob["breakdown"]["totals"]["costUsd"] == 0 and bob["breakdown"]["agents"] == []
    r = stack.call("GET", "/api/usage", user="bob", query={"agentId": agent["id"]})  # every key is bob's: nothing
    assert r.status == 200 and r.data["items"] == [] and r.data["breakdown"]["totals"]["costUsd"] == 0
    assert r.data["breakdown"]["spending"]["limits"] == {} and r.data["breakdown"]["spending"]["todayUsd"] == 0


def test_the_totals_go_with_the_account_and_stay_with_a_deleted_agents_rows(stack):
    Model(stack)
    agent = stack.agent(model=MODEL)
    assert stack.say(agent["id"], "hi").status == 200
    assert stack.call("DELETE", f"/api/agents/{agent['id']}").status == 200
    usage = _usage(stack)  # the rows stay (billing history), and so do the totals
    assert [row["costUsd"] for row in usage["items"]] == [CALL_USD] and usage["breakdown"]["totals"]["costUsd"] == CALL_USD
    assert usage["breakdown"]["agents"][0]["agentId"] == agent["id"]
    mine = _usage(stack, agentId=agent["id"])  # still listed by the deleted agent's id
    assert len(mine["items"]) == 1 and mine["breakdown"]["totals"]["costUsd"] == CALL_USD
    assert stack.call("DELETE", "/api/me").status == 200
    after = _usage(stack)
    assert after["items"] == [] and after["breakdown"]["totals"]["costUsd"] == 0


# ---- consistency under faults ----------------------------------------------------------------------
@pytest.fixture(params=["fake", "moto"])
def any_stack(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("stack" if request.param == "fake" else "moto_stack")


@pytest.mark.parametrize("fault", [LOST, LOST_FOR_GOOD, REFUSED])
def test_totals_stay_the_sum_of_the_rows_when_the_commit_meets_a_fault(any_stack, faults: Faults, fault):
    Model(any_stack, _tool_use(), _message([{"type": "text", "text": "Done."}]))
    agent = any_stack.agent(model=MODEL)
    faults.add("dynamodb", "TransactWriteItems", fault)
    r = any_stack.say(agent["id"], "what time is it?")
    faults.clear()
    assert r.status in (200, 503), r.body
    rows = _all_rows(any_stack)
    assert len(rows) == 1 and rows[0]["costUsd"] == round(2 * CALL_USD, 8)  # committed, or recorded as failed: once
    assert_breakdown_is_the_sum_of_the_rows(any_stack)
    assert _usage(any_stack)["breakdown"]["totals"]["toolCalls"] == 1


def test_a_summary_or_extraction_row_recorded_twice_counts_once(stack):
    from engram.kernel.ids import tenant_key
    from engram.usage.models import UsageRow

    row = UsageRow(
        id="run_x-c1", created_at=datetime.now(UTC).isoformat(), agent_id="ag_1", session_key="s", run_id="run_x", model=MODEL,
        input_tokens=10, cost_usd=0.5,
    )  # fmt: skip
    assert stack.deps.usage.record(tenant_key("alice"), row, kind="summary") is True
    assert stack.deps.usage.record(tenant_key("alice"), row.model_copy(update={"cost_usd": 9.0}), kind="summary") is False
    breakdown = _usage(stack)["breakdown"]
    assert breakdown["totals"]["costUsd"] == 0.5 and breakdown["kinds"][0]["kind"] == "summary"
    assert [r["costUsd"] for r in _all_rows(stack)] == [0.5]


@pytest.mark.parametrize("fault", [LOST, REFUSED])
def test_totals_stay_the_sum_of_the_rows_when_the_jobs_writes_meet_a_fault(any_stack, faults: Faults, fault):
    agent = any_stack.agent(agentMemory=True)  # the offline model: tokens, no cost
    assert any_stack.say(agent["id"], "I prefer tea. Our deploy day is Tuesday.").status == 200
    faults.add("dynamodb", "TransactWriteItems", fault, times=2)  # the extraction's writes (and a retry's)
    _drain_extractions(any_stack)
    assert ("dynamodb", "TransactWriteItems", fault) in faults.injected
    faults.clear()
    _drain_extractions(any_stack)  # a refused job is delivered again
    assert any(row["id"].rsplit("-", 1)[-1].startswith("x") for row in _all_rows(any_stack))
    assert_breakdown_is_the_sum_of_the_rows(any_stack)


def test_a_socket_turn_over_its_limit_ends_in_turn_failed_naming_the_limit(stack):
    from tests.integration.test_stream_api import Socket

    model = Model(stack, _tool_use(), _message([{"type": "text", "text": "Done."}]))
    agent = stack.agent(model=MODEL, limits={"dailyCostUsd": 0.01})
    socket = Socket(stack)
    queued = socket.turn(agent["id"], "what time is it?")
    stack.drain_turns()
    events = socket.of_run(queued["runId"])
    assert [e["type"] for e in events][-1] == "turn.failed" and model.requests == 1
    error = events[-1]["error"]
    assert error["code"] == "limit_exceeded" and error["field"] == "limits.dailyCostUsd"
    assert error["limit"]["name"] == "dailyCostUsd" and error["limit"]["spentUsd"] == CALL_USD
    assert stack.call("GET", f"/api/runs/{queued['runId']}").data["error"]["code"] == "limit_exceeded"


def test_a_heartbeat_that_reaches_its_limit_mid_run_stops_and_records_its_spending(stack):
    model = Model(stack, _tool_use(), _message([{"type": "text", "text": "Done."}]))
    agent = stack.agent(model=MODEL, schedule="rate(1 hour)", defaultPrompt="What time is it?", limits={"dailyCostUsd": 0.01})

    out = stack.fire(agent["id"])

    run = stack.call("GET", f"/api/runs/{out['runId']}").data
    assert run["kind"] == "heartbeat" and run["status"] == "failed" and model.requests == 1
    assert run["error"]["code"] == "limit_exceeded" and "skipped" not in run["error"]  # it started, then stopped
    assert run["usage"]["costUsd"] == CALL_USD and [c["name"] for c in run["toolCalls"]] == ["get_current_time"]
    assert _usage(stack)["breakdown"]["kinds"] == [
        {
            "kind": "heartbeat",
            "costUsd": CALL_USD,
            "inputTokens": 1000,
            "outputTokens": 100,
            "cacheReadTokens": 2000,
            "cacheWriteTokens": 500,
            "cacheSavingsUsd": run["usage"]["cacheSavingsUsd"],
            "toolCalls": 1,
        }
    ]
