"""The spending guard (TL10) and the usage totals' arithmetic (OB4), without I/O."""

from __future__ import annotations

from datetime import date

import pytest

from engram.engine.pricing import cache_savings_usd, priced_usage
from engram.kernel.errors import LimitExceeded, error_body, error_of
from engram.usage import totals
from engram.usage.limits import Spend, SpendGuard
from engram.usage.models import Limits, UsageRow

DAY = date(2026, 12, 31)


def _guard(agent: dict[str, float] | None = None, user: dict[str, float] | None = None, **spent: float) -> SpendGuard:
    return SpendGuard(
        Limits.model_validate(agent) if agent else None,
        Spend(day=DAY, user_limits=Limits.model_validate(user) if user else None, **spent),
    )


def test_no_limit_no_guard():
    assert not _guard().active
    assert _guard(agent={"toolCallsPerTurn": 3}).active and _guard(user={"monthlyCostUsd": 1}).active


def test_a_call_is_refused_when_recorded_plus_spent_plus_the_last_call_would_pass_the_limit():
    guard = _guard(agent={"dailyCostUsd": 1.0}, agent_day=0.5)
    guard.before_call(0.2, 0.2)  # 0.9: under
    with pytest.raises(LimitExceeded) as caught:
        guard.before_call(0.3, 0.3)  # 1.1 would pass
    assert caught.value.context["limit"] == {
        "name": "dailyCostUsd",
        "scope": "agent",
        "value": 1.0,
        "spentUsd": 0.8,
        "resetsAt": "2027-01-01T00:00:00Z",  # the next UTC midnight, across the year's end
    }
    with pytest.raises(LimitExceeded):
        _guard(agent={"dailyCostUsd": 1.0}, agent_day=1.0).before_call(0.0)  # reached: even a first call


def test_the_persons_monthly_limit_resets_on_the_first_of_next_month():
    with pytest.raises(LimitExceeded) as caught:
        _guard(user={"monthlyCostUsd": 10}, user_month=10.5).before_call(0.0)
    limit = caught.value.context["limit"]
    assert (limit["scope"], limit["name"], limit["resetsAt"]) == ("user", "monthlyCostUsd", "2027-01-01T00:00:00Z")
    assert totals.next_month(date(2026, 2, 14)) == "2026-03-01T00:00:00Z"


def test_tool_calls_per_turn_refuses_an_answer_that_would_pass_the_cap():
    guard = _guard(agent={"toolCallsPerTurn": 3})
    guard.before_tools(1, 2)
    with pytest.raises(LimitExceeded) as caught:
        guard.before_tools(2, 2)
    assert caught.value.context["limit"] == {"name": "toolCallsPerTurn", "scope": "agent", "value": 3}


def test_limit_exceeded_speaks_the_one_error_language():
    err = LimitExceeded("reached", limit={"name": "dailyCostUsd", "scope": "agent", "value": 1.0})
    assert err.status == 402
    assert error_body(err) == {
        "code": "limit_exceeded",
        "message": "reached",
        "field": "limits.dailyCostUsd",
        "limit": err.context["limit"],
    }
    assert error_of(err) == {
        "code": "limit_exceeded",
        "message": "reached",
        "field": "limits.dailyCostUsd",
        "limit": err.context["limit"],
    }


def _row(model: str = "claude-sonnet-4-6", at: str = "2026-12-31T23:59:59.000Z", **usage: int) -> UsageRow:
    priced = priced_usage(model, **{"input_tokens": 0, "output_tokens": 0, **usage})
    return UsageRow(id="r-0", created_at=at, agent_id="ag_1", session_key="s", run_id="r", model=model, **priced.model_dump())


def test_a_write_adds_to_the_persons_and_the_agents_day_and_month():
    row = _row(input_tokens=1000, output_tokens=100)
    ups = totals.updates("t", [row], kind="chat", tool_calls=2)
    assert [sk for _, sk, _ in ups] == ["U#D#2026-12-31", "A#ag_1#D#2026-12-31", "U#M#2026-12", "A#ag_1#M#2026-12"]
    person, agent = ups[0][2], ups[1][2]
    assert person["costUsd"] == 0.0045 and person["m|claude-sonnet-4-6|costUsd"] == 0.0045
    assert person["k|chat|toolCalls"] == 2 and person["a|ag_1|costUsd"] == 0.0045 and person["toolCalls"] == 2
    assert not any(name.startswith("a|") for name in agent)
    assert "cacheReadTokens" not in person  # zeros are left out: an absent attribute reads as 0
    assert totals.updates("t", [_row()], kind="chat") == []  # nothing spent, nothing written


def test_an_item_reads_back_as_its_breakdown():
    delta = totals.increments([_row(input_tokens=10), _row("claude-haiku-4-5", input_tokens=20)], kind="summary", per_agent=True)
    split = totals.split([delta])
    assert set(split["model"]) == {"claude-sonnet-4-6", "claude-haiku-4-5"} and set(split["kind"]) == {"summary"}
    listed = totals.listed(split["model"], "model")
    assert [e["model"] for e in listed] == ["claude-sonnet-4-6", "claude-haiku-4-5"]  # most expensive first
    assert "toolCalls" not in listed[0] and totals.whole(delta)["inputTokens"] == 30


def test_cache_savings_count_reads_saved_and_write_premiums():
    # Sonnet $3/M input: a read costs $0.30/M, a 5-minute write $3.75/M, a 1-hour write $6/M.
    assert cache_savings_usd("claude-sonnet-4-6", cache_read_tokens=1_000_000, cache_write_tokens=0) == 2.7
    assert cache_savings_usd("claude-sonnet-4-6", cache_read_tokens=0, cache_write_tokens=1_000_000) == -0.75
    assert (
        cache_savings_usd("claude-sonnet-4-6", cache_read_tokens=0, cache_write_tokens=1_000_000, cache_write_1h_tokens=1_000_000)
        == -3.0
    )
    assert cache_savings_usd("unknown-model", cache_read_tokens=5, cache_write_tokens=5) == 0.0


def _emf_lines(out: str) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in out.splitlines() if '"_aws"' in line]


@pytest.mark.parametrize("per_agent", [False, True])
def test_usage_metrics_are_per_kind_always_and_per_agent_when_turned_on(monkeypatch, capsys, per_agent):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    usage = priced_usage("claude-sonnet-4-6", input_tokens=1000, output_tokens=100)
    totals.emit_metrics("heartbeat", "ag_1", usage, per_agent=per_agent)
    lines = _emf_lines(capsys.readouterr().out)
    cost = [line for line in lines if "UsageCostUsd" in line]
    assert {line["Kind"] for line in cost} == {"heartbeat"} and all(line["UsageCostUsd"] in (0.0045, [0.0045]) for line in cost)
    assert [line.get("AgentId") for line in cost] == ([None, "ag_1"] if per_agent else [None])
