"""Card types as data (AM7), decision cards through submit_result, and reviewDecisions (AM5)."""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

import pytest

from engram.engine.providers.base import ModelResponse, TokenCounts
from engram.kernel.ids import tenant_key
from engram.runs.models import Run

SIGNAL = {
    "description": "A release call.",
    "fields": {
        "verdict": {"type": "enum", "required": True, "enum": ["SHIP", "HOLD"]},
        "why": {"type": "string", "required": True, "maxLength": 80},
        "risk": {"type": "integer", "min": 0, "max": 10},
        "tested": {"type": "boolean"},
    },
    "reExaminable": True,
    "reExamineActions": ["KEEP", "REVERT"],
    "summaryFields": ["why"],
}


class Scripted:
    """A fake model: plays back a list of tool calls, then answers in text; records what it was sent."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]):
        self.calls = list(calls)
        self.requests: list[dict[str, Any]] = []

    def complete(self, *, model, system, tools, messages, max_tokens, timeout, tool_choice=None):
        self.requests.append({"system": system, "tools": tools, "messages": messages})
        tokens = TokenCounts(input_tokens=10, output_tokens=5)
        if self.calls:
            name, tool_input = self.calls.pop(0)
            block = {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": name, "input": tool_input}
            return ModelResponse(content=[block], stop_reason="tool_use", model=model, tokens=tokens)
        return ModelResponse(content=[{"type": "text", "text": "done"}], stop_reason="end_turn", model=model, tokens=tokens)


# --- card type API ----------------------------------------------------------------------------
def test_built_ins_are_listed_and_readable(stack):
    items = stack.call("GET", "/api/card-types").data["items"]
    assert [c["name"] for c in items] == ["decision", "trade-decision"]
    trade = stack.call("GET", "/api/card-types/trade-decision").data
    assert trade["builtIn"] is True and trade["reExaminable"] == "until_resolved"
    assert trade["reExamineActions"] == ["HOLD", "CLOSE", "SCALE"]
    assert trade["fields"]["decision"]["enum"] == ["WAIT", "LONG", "SHORT"]
    decision = stack.call("GET", "/api/card-types/decision").data
    assert set(decision["fields"]) == {"decision", "reason", "confidence"}
    assert decision["fields"]["confidence"] == {
        "type": "integer",
        "required": True,
        "min": 0,
        "max": 100,
        "description": "How sure, 0-100.",
    }
    assert stack.call("GET", "/api/card-types/nope").status == 404


def test_put_creates_then_replaces_a_custom_type(stack):
    made = stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    assert made.status == 201, made.body
    assert made.data["id"] == made.data["name"] == "release-call" and made.data["builtIn"] is False
    assert made.data["fields"]["risk"] == {"type": "integer", "required": False, "min": 0, "max": 10, "description": ""}
    again = stack.call("PUT", "/api/card-types/release-call", body={**SIGNAL, "description": "Changed."})
    assert again.status == 200 and again.data["description"] == "Changed." and again.data["createdAt"] == made.data["createdAt"]
    assert stack.call("GET", "/api/card-types/release-call").data["description"] == "Changed."
    assert [c["name"] for c in stack.call("GET", "/api/card-types").data["items"]] == [
        "decision",
        "trade-decision",
        "release-call",
    ]


@pytest.mark.parametrize("name", ["decision", "trade-decision"])
def test_built_ins_cannot_be_overwritten(stack, name):
    r = stack.call("PUT", f"/api/card-types/{name}", body=SIGNAL)
    assert r.status == 409 and r.error["code"] == "built_in_card_type" and r.error["field"] == "name"
    assert stack.call("GET", f"/api/card-types/{name}").data["builtIn"] is True


def _with(**changes: Any) -> dict[str, Any]:
    body = {**SIGNAL, "fields": {k: dict(v) for k, v in SIGNAL["fields"].items()}}
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = body
        for p in parents:
            node = node[p]
        if value is ...:
            node.pop(leaf)
        else:
            node[leaf] = value
    return body


@pytest.mark.parametrize(
    "body, field",
    [
        (_with(fields={}), "fields"),
        (_with(fields=...), "fields"),
        (_with(fields__why__type="text"), "fields.why.type"),
        (_with(fields__verdict__enum=...), "fields.verdict.enum"),
        (_with(fields__why__enum=["A"]), "fields.why.enum"),
        (_with(fields__verdict__enum=["SHIP", "SHIP"]), "fields.verdict.enum"),
        (_with(fields__why__min=1), "fields.why.min"),
        (_with(fields__risk__min=11), "fields.risk.min"),
        (_with(fields__risk__maxLength=3), "fields.risk.maxLength"),
        (_with(fields__why__maxLength=0), "fields.why.maxLength"),
        (_with(fields__why__colour="red"), "fields.why.colour"),
        (_with(fields__Bad_Name={"type": "string"}), "fields.Bad_Name.[key]"),
        (_with(reExaminable="sometimes"), "reExaminable"),
        (_with(reExamineActions=["hold"]), "reExamineActions.0"),
        (_with(summaryFields=["nope"]), "summaryFields.0"),
        (_with(extra=1), "extra"),
    ],
)
def test_bad_card_type_bodies_name_the_field(stack, body, field):
    r = stack.call("PUT", "/api/card-types/release-call", body=body)
    assert r.status == 400, r.body
    assert r.error["field"] == field, r.body
    assert stack.call("GET", "/api/card-types/release-call").status == 404  # nothing written


def test_bad_card_type_names(stack):
    assert stack.call("PUT", "/api/card-types/a.b", body=SIGNAL).error["field"] == "name"
    assert stack.call("PUT", "/api/card-types/" + "x" * 65, body=SIGNAL).status == 400


def test_agents_need_an_existing_card_type(stack):
    r = stack.call("POST", "/api/agents", body={"name": "A", "cardType": "release-call"})
    assert r.status == 404 and r.error["field"] == "cardType"
    agent = stack.agent(cardType="trade-decision")
    assert agent["cardType"] == "trade-decision"
    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"cardType": "nope"}).error["field"] == "cardType"
    stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"cardType": "release-call"}).data["cardType"] == "release-call"
    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"cardType": None}).data["cardType"] is None


# --- cards ------------------------------------------------------------------------------------
def test_an_invalid_card_is_answered_with_its_problems_then_a_valid_one_is_the_result(stack):
    stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    agent = stack.agent(cardType="release-call")
    fake = Scripted(
        [
            ("submit_result", {"verdict": "MAYBE", "risk": 12.5, "tested": "yes", "colour": "red"}),
            ("submit_result", {"verdict": "SHIP", "why": " all green ", "risk": 3.0}),
        ]
    )
    stack.deps.provider_override = fake
    turn = stack.say(agent["id"], "ship it?")
    assert turn.status == 200, turn.body

    tools = {t["name"]: t for t in fake.requests[0]["tools"]}
    assert "get_my_decisions" not in tools  # reviewDecisions is off
    schema = tools["submit_result"]["input_schema"]
    assert schema["required"] == ["verdict", "why"] and schema["additionalProperties"] is False
    assert schema["properties"]["verdict"] == {"type": "string", "enum": ["SHIP", "HOLD"]}
    assert schema["properties"]["risk"] == {"type": "integer", "minimum": 0, "maximum": 10}
    system = "\n".join(b["text"] for b in fake.requests[0]["system"])
    assert "submit_result with a `release-call` card" in system and "get_my_decisions" not in system

    first, second = turn.data["toolCalls"]
    problems = first["result"]
    for expected in (
        "colour: not a field",
        "verdict: must be one of SHIP, HOLD",
        "why: required",
        "risk: must be a whole number",
        "tested: must be true or false",
    ):
        assert expected in problems, problems
    assert second["result"]["accepted"] is True

    run = stack.call("GET", f"/api/runs/{turn.data['runId']}").data
    assert run["result"] == {
        "reply": "done",
        "card": {"verdict": "SHIP", "why": "all green", "risk": 3},
        "cardType": "release-call",
    }


def test_without_a_card_type_there_is_no_submit_result(stack):
    agent = stack.agent()
    fake = Scripted([("submit_result", {"decision": "GO"})])
    stack.deps.provider_override = fake
    turn = stack.say(agent["id"], "hi")
    assert "submit_result" not in {t["name"] for t in fake.requests[0]["tools"]}
    assert turn.data["toolCalls"][0]["result"] == "unknown tool 'submit_result'"
    assert stack.call("GET", f"/api/runs/{turn.data['runId']}").data["result"] == {"reply": "done"}


def test_the_offline_model_submits_a_valid_card(stack):
    agent = stack.agent(cardType="decision")
    turn = stack.say(agent["id"], "should we migrate the billing database")
    assert [c["name"] for c in turn.data["toolCalls"]] == ["submit_result"]
    run = stack.call("GET", f"/api/runs/{turn.data['runId']}").data
    assert run["result"]["cardType"] == "decision"
    assert run["result"]["card"] == {
        "decision": "SHOULD",
        "reason": "offline: should we migrate the billing database",
        "confidence": 50,
    }


# --- reviewDecisions --------------------------------------------------------------------------
def _put_run(
    stack,
    user: str,
    agent_id: str,
    run_id: str,
    created_at: str,
    card: dict[str, Any] | None,
    card_type: str = "trade-decision",
    status: str = "succeeded",
) -> None:
    result = {"reply": "r", "card": card, "cardType": card_type} if card is not None else {"reply": "r"}
    run = Run(
        id=run_id,
        created_at=created_at,
        updated_at=created_at,
        agent_id=agent_id,
        status=status,
        session_id="dashboard",
        result=result,
    )
    stack.deps.runs.put(tenant_key(user), run)


def _iso(days: float) -> str:
    from datetime import datetime, timedelta

    stamp = datetime.now(UTC) - timedelta(days=days)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _trade(decision: str, summary: str) -> dict[str, Any]:
    return {"asset": "BTC", "decision": decision, "summary": summary, "confidence": 60}


def test_get_my_decisions_returns_the_last_five_cards_newest_first(stack):
    agent = stack.agent(cardType="trade-decision", reviewDecisions=True)
    aid = agent["id"]
    # Run ids sort by time, like the real ones; a run without a card and a failed run are skipped.
    _put_run(stack, "alice", aid, "run_00001", _iso(9), _trade("LONG", "oldest, not shown"))
    for i, (days, decision, summary) in enumerate(
        [(6, "LONG", "breakout held"), (5, "SHORT", "lost support"), (4, "WAIT", "chop")]
    ):
        _put_run(stack, "alice", aid, f"run_0001{i}", _iso(days), _trade(decision, summary))
    _put_run(stack, "alice", aid, "run_00020", _iso(3), None)
    _put_run(stack, "alice", aid, "run_00021", _iso(2.5), _trade("LONG", "failed run"), status="failed")
    _put_run(stack, "alice", aid, "run_00030", _iso(2), _trade("WAIT", "range unresolved"))
    _put_run(stack, "alice", aid, "run_00031", _iso(0.1), _trade("LONG", "x" * 120))

    fake = Scripted([("get_my_decisions", {}), ("submit_result", _trade("WAIT", "still ranging"))])
    stack.deps.provider_override = fake
    turn = stack.say(aid, "analyze BTC")
    assert turn.status == 200, turn.body
    system = "\n".join(b["text"] for b in fake.requests[0]["system"])
    assert "Start every run by calling get_my_decisions" in system
    entries = turn.data["toolCalls"][0]["result"]["decisions"]
    assert entries[0] == "2h ago · LONG · " + "x" * 79 + "…"
    assert entries[1:] == [
        "2d ago · WAIT · range unresolved",
        "4d ago · WAIT · chop",
        "5d ago · SHORT · lost support",
        "6d ago · LONG · breakout held",
    ]
    assert all("analyze" not in e for e in entries)  # entries, never transcripts

    listed = stack.call("GET", f"/api/agents/{aid}/decisions").data["items"]
    assert [d["runId"] for d in listed] == [turn.data["runId"], "run_00031", "run_00030", "run_00012", "run_00011"]
    newest = listed[0]
    assert (
        newest["entry"] == "just now · WAIT · still ranging"
        and newest["action"] == "WAIT"
        and newest["summary"] == "still ranging"
    )
    assert newest["card"] == _trade("WAIT", "still ranging") and newest["cardType"] == "trade-decision"
    assert set(newest) == {"runId", "createdAt", "cardType", "action", "summary", "entry", "card"}
    assert len(stack.call("GET", f"/api/agents/{aid}/decisions", query={"limit": "2"}).data["items"]) == 2
    assert stack.call("GET", f"/api/agents/{aid}/decisions", query={"limit": "21"}).status == 400


def test_the_offline_model_reviews_then_submits(stack):
    agent = stack.agent(cardType="trade-decision", reviewDecisions=True)
    first = stack.say(agent["id"], "analyze BTC").data
    assert [c["name"] for c in first["toolCalls"]] == ["get_my_decisions", "submit_result"]
    assert first["toolCalls"][0]["result"] == {"decisions": [], "note": "no earlier decisions yet"}
    second = stack.say(agent["id"], "analyze BTC again").data
    assert [c["name"] for c in second["toolCalls"]] == ["get_my_decisions", "submit_result"]
    seen = second["toolCalls"][0]["result"]["decisions"]
    assert len(seen) == 1 and re.fullmatch(r"just now · WAIT · offline: analyze BTC", seen[0]), seen


def test_decisions_are_private_to_their_owner(stack):
    stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    agent = stack.agent(cardType="release-call", reviewDecisions=True)
    stack.say(agent["id"], "ship it")
    assert len(stack.call("GET", f"/api/agents/{agent['id']}/decisions").data["items"]) == 1
    assert stack.call("GET", f"/api/agents/{agent['id']}/decisions", user="bob").status == 404
    assert stack.call("GET", "/api/card-types/release-call", user="bob").status == 404
    assert [c["name"] for c in stack.call("GET", "/api/card-types", user="bob").data["items"]] == ["decision", "trade-decision"]
    r = stack.call("POST", "/api/agents", user="bob", body={"name": "B", "cardType": "release-call"})
    assert r.status == 404 and r.error["field"] == "cardType"
    # bob may have his own type of the same name; alice's stays as it was
    assert stack.call("PUT", "/api/card-types/release-call", user="bob", body={**SIGNAL, "description": "Bob's."}).status == 201
    assert stack.call("GET", "/api/card-types/release-call").data["description"] == "A release call."
    assert stack.call("GET", "/api/agents/nope/decisions").status == 404


def test_own_card_types_are_exported_and_deleted_with_the_account(stack):
    stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    stack.call("PUT", "/api/card-types/release-call", user="bob", body=SIGNAL)
    export = stack.call("GET", "/api/me/export").data
    assert [c["name"] for c in export["cardTypes"]] == ["release-call"]
    assert export["cardTypes"][0]["fields"]["risk"]["max"] == 10
    assert stack.call("DELETE", "/api/me").status == 200
    assert stack.call("GET", "/api/card-types/release-call").status == 404
    assert stack.call("GET", "/api/me/export").data["cardTypes"] == []
    assert stack.call("GET", "/api/card-types/release-call", user="bob").status == 200


def test_offline_model_answers_about_me_and_still_submits_the_card(stack):
    agent = stack.agent(cardType="trade-decision")
    stack.say(agent["id"], "remember that I prefer green tea over coffee")
    reply = stack.say(agent["id"], "what do you know about me?").data
    assert "Here is what I know about you" in reply["reply"] and "green tea" in reply["reply"], reply["reply"]
    run = stack.runs(agent["id"])[0]
    assert run["result"]["card"]["decision"] == "WAIT"  # the card is kept
