"""Re-examination (AM6) and council runs with run memory (RM1-RM4), against moto with the
resources of template.yaml, with the offline model (a provider wrapper makes one specialist fail)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engram.engine.providers.offline import OfflineProvider
from engram.kernel.errors import ProviderError


class RecordingProvider:
    """The offline model, recording what it was sent; a model named `broken-model` always fails."""

    name = "offline"

    def __init__(self, registry: Any):
        self.inner = OfflineProvider(registry.offline_intents)
        self.calls: list[dict[str, Any]] = []

    def complete(self, **kw: Any) -> Any:
        self.calls.append(kw)
        if kw["model"] == "broken-model":
            raise ProviderError("the model is unavailable", code="model_error")
        return self.inner.complete(**kw)

    def system_text(self, i: int = -1) -> str:
        return "\n".join(b["text"] for b in self.calls[i]["system"])


def is_member_call(call: dict[str, Any]) -> bool:
    """A specialist's model call: its run opens with the council brief."""
    return "specialist on a council led by" in json.dumps(call["messages"][0])


@pytest.fixture
def model(stack):
    provider = RecordingProvider(stack.deps.registry)
    stack.deps.provider_override = provider
    return provider


def reexamine(stack, run_id, user="alice"):
    r = stack.call("POST", f"/api/runs/{run_id}/re-examine", user=user)
    if r.status != 202:
        return r
    stack.drain_runs()
    return stack.call("GET", f"/api/runs/{r.data['runId']}", user=user)


# --- re-examination -------------------------------------------------------------------------
def test_reexamination_end_to_end(stack, model):
    agent = stack.agent(cardType="trade-decision", defaultPrompt="Analyse BTC.")
    parent = stack.run_now(agent["id"])
    assert parent["status"] == "succeeded" and parent["result"]["card"]["decision"] == "WAIT"
    original = json.dumps(parent["result"], sort_keys=True)

    child = reexamine(stack, parent["id"])
    assert child.status == 200, child.body
    child = child.data
    assert child["kind"] == "reexamination" and child["parentRunId"] == parent["id"] and child["status"] == "succeeded"
    card = child["result"]["card"]
    assert child["result"]["cardType"] == "re-examination"
    assert 0 <= card["conviction_score"] <= 100 and card["suggested_action"] in ("HOLD", "CLOSE", "SCALE") and card["notes"]
    # The prompt was built server-side from the parent's card, with the action vocabulary.
    assert "RE-EXAMINATION" in child["prompt"] and '"WAIT"' in child["prompt"] and "HOLD, CLOSE, SCALE" in child["prompt"]
    # submit_result's schema was the re-examination card, not the agent's own.
    tools = {t["name"]: t for t in model.calls[-1]["tools"]}
    assert set(tools["submit_result"]["input_schema"]["required"]) == {"conviction_score", "notes", "suggested_action"}

    after = stack.call("GET", f"/api/runs/{parent['id']}").data
    assert json.dumps(after["result"], sort_keys=True) == original  # the parent never changes
    assert after["latestConviction"] == card["conviction_score"]
    listed = {r["id"]: r for r in stack.runs(agent["id"])}
    assert listed[parent["id"]]["latestConviction"] == card["conviction_score"]

    second = reexamine(stack, parent["id"]).data
    history = stack.call("GET", f"/api/runs/{parent['id']}/re-examinations").data["items"]
    assert [r["id"] for r in history] == [child["id"], second["id"]]  # in order


def test_until_resolved_refuses_once_resolved_or_expired(stack, model):
    agent = stack.agent(cardType="trade-decision", defaultPrompt="Analyse BTC.")
    parent = stack.run_now(agent["id"])
    r = stack.call("PATCH", f"/api/runs/{parent['id']}", body={"resolutionStatus": "resolved"})
    assert r.status == 200 and r.data["resolutionStatus"] == "resolved"
    r = stack.call("POST", f"/api/runs/{parent['id']}/re-examine")
    assert r.status == 409 and r.error["code"] == "decision_resolved"
    stack.call("PATCH", f"/api/runs/{parent['id']}", body={"resolutionStatus": "expired"})
    assert stack.call("POST", f"/api/runs/{parent['id']}/re-examine").status == 409
    stack.call("PATCH", f"/api/runs/{parent['id']}", body={"resolutionStatus": "open"})
    assert stack.call("POST", f"/api/runs/{parent['id']}/re-examine").status == 202
    assert stack.call("GET", f"/api/runs/{parent['id']}").data["result"]["card"]["decision"] == "WAIT"


def test_decision_cards_without_until_resolved_and_custom_actions(stack, model):
    r = stack.call(
        "PUT",
        "/api/card-types/thesis",
        body={
            "fields": {"thesis": {"type": "string", "required": True, "maxLength": 200}},
            "reExaminable": True,
            "reExamineActions": ["KEEP", "REVISE"],
        },
    )
    assert r.status in (200, 201), r.body
    agent = stack.agent(cardType="thesis", defaultPrompt="Write a thesis.")
    parent = stack.run_now(agent["id"])
    stack.call("PATCH", f"/api/runs/{parent['id']}", body={"resolutionStatus": "resolved"})
    child = reexamine(stack, parent["id"]).data  # reExaminable true: resolved does not stop it
    assert child["result"]["card"]["suggested_action"] in ("KEEP", "REVISE")

    plain = stack.agent(cardType="decision", defaultPrompt="Decide.")
    run = stack.run_now(plain["id"])
    child = reexamine(stack, run["id"]).data  # no actions: any short uppercase word
    assert child["status"] == "succeeded" and child["result"]["card"]["suggested_action"].isupper()


def test_reexamine_and_patch_bad_input(stack, model):
    agent = stack.agent(defaultPrompt="No card here.")
    run = stack.run_now(agent["id"])
    r = stack.call("POST", f"/api/runs/{run['id']}/re-examine")
    assert r.status == 409 and r.error["code"] == "not_reexaminable"
    r = stack.call("PATCH", f"/api/runs/{run['id']}", body={"resolutionStatus": "resolved"})
    assert r.status == 409
    carded = stack.agent(cardType="trade-decision", defaultPrompt="Analyse BTC.")
    parent = stack.run_now(carded["id"])
    for body in ({"resolutionStatus": "closed"}, {"resolutionStatus": 3}, {}, {"resolutionStatus": "open", "x": 1}):
        assert stack.call("PATCH", f"/api/runs/{parent['id']}", body=body).status in (400, 422)
    assert stack.call("POST", "/api/runs/run_missing/re-examine").status == 404
    assert stack.call("POST", "/api/runs/..%2F..%2Fx/re-examine").status in (400, 404)
    # Another user's runs do not exist for them.
    assert stack.call("POST", f"/api/runs/{parent['id']}/re-examine", user="bob").status == 404
    assert stack.call("PATCH", f"/api/runs/{parent['id']}", user="bob", body={"resolutionStatus": "resolved"}).status == 404
    assert stack.call("GET", f"/api/runs/{parent['id']}/re-examinations", user="bob").status == 404
    assert stack.call("GET", f"/api/runs/{parent['id']}/memory", user="bob").status == 404
    assert stack.call("GET", f"/api/runs/{parent['id']}").data["resolutionStatus"] is None


# --- council runs ------------------------------------------------------------------------------
def test_council_with_one_failing_specialist(stack, model):
    good = stack.agent(name="Chartist", persona="Reads price charts.", reviewDecisions=True, cardType="decision")
    bad = stack.agent(name="Newsreader", model="broken-model")
    lead = stack.agent(
        name="Director",
        team=[good["id"], bad["id"]],
        defaultPrompt="Decide on BTC today.",
        cardType="trade-decision",
        reviewDecisions=True,
    )
    run = stack.run_now(lead["id"], inputs={"asset": "BTC", "budget": {"usd": 1000}})
    assert run["status"] == "succeeded", run
    assert "task:" + good["id"] in run["prompt"] and "task:" + bad["id"] in run["prompt"]  # keys named...
    assert "offline: " not in run["prompt"]  # ...but not their values

    memory = stack.call("GET", f"/api/runs/{run['id']}/memory").data["items"]
    by_key = {e["key"]: e for e in memory}
    assert by_key["input:asset"]["value"] == "BTC" and by_key["input:budget"]["value"] == {"usd": 1000}
    assert by_key["input:asset"]["kind"] == "input"
    ok, failed = by_key["task:" + good["id"]], by_key["task:" + bad["id"]]
    assert ok["kind"] == "task_result" and ok["value"]["status"] == "succeeded" and ok["value"]["card"]["decision"]
    assert failed["value"]["status"] == "failed" and failed["value"]["error"]["code"] == "model_error"

    # Specialists ran blind: no get_my_decisions, no prior decisions, and on the lead's task.
    member_calls = [c for c in model.calls if is_member_call(c)]
    assert member_calls and all("get_my_decisions" not in {t["name"] for t in c["tools"]} for c in member_calls)
    # The lead read the specialists' results through memory_read, and got its roster.
    lead_calls = [c for c in model.calls if "## Your team" in "\n".join(b["text"] for b in c["system"])]
    assert lead_calls and any("memory_read" in json.dumps(c["messages"]) for c in lead_calls)
    calls = {c["name"] for c in run["toolCalls"]}
    assert {"get_my_decisions", "memory_read", "submit_result"} <= calls
    read = next(c for c in run["toolCalls"] if c["name"] == "memory_read")
    assert "task:" + good["id"] in json.dumps(read["result"])

    members = [r for r in stack.runs(good["id"]) + stack.runs(bad["id"]) if r["kind"] == "council_member"]
    assert {r["status"] for r in members} == {"succeeded", "failed"}
    assert all(r["councilRunId"] == run["id"] and r["sessionId"] is None for r in members)
    # A member's run memory is its council's.
    assert stack.call("GET", f"/api/runs/{members[0]['id']}/memory").data["runId"] == run["id"]


def test_reexamining_a_council_keeps_specialists_blind(stack, model):
    member = stack.agent(name="Chartist")
    lead = stack.agent(name="Director", team=[member["id"]], defaultPrompt="Decide on BTC today.", cardType="trade-decision")
    parent = stack.run_now(lead["id"])
    model.calls.clear()
    child = reexamine(stack, parent["id"]).data
    assert child["status"] == "succeeded"
    member_msgs = [json.dumps(c["messages"]) for c in model.calls if is_member_call(c)]
    assert member_msgs and all("RE-EXAMINATION" not in m and parent["id"] not in m for m in member_msgs)
    assert "RE-EXAMINATION" in child["prompt"] and "task:" + member["id"] in child["prompt"]


def test_director_learnings_carry_to_the_next_run(stack, model):
    member = stack.agent(name="Chartist")
    lead = stack.agent(name="Director", team=[member["id"]], defaultPrompt="Decide on BTC today.")
    run = stack.run_now(lead["id"], prompt="Decide on BTC today.\nLearning: the chartist is early on breakouts")
    assert "store_learning" in {c["name"] for c in run["toolCalls"]}
    rows = stack.call("GET", f"/api/agents/{lead['id']}/memories").data["items"]
    learning = next(r for r in rows if r["key"].startswith("director:learning:"))
    assert learning["source"] == "director" and "early on breakouts" in learning["value"]

    model.calls.clear()
    stack.run_now(lead["id"])
    lead_systems = [s for s in (("\n".join(b["text"] for b in c["system"])) for c in model.calls) if "## Your team" in s]
    assert lead_systems and "early on breakouts" in lead_systems[0] and "Director learnings" in lead_systems[0]
    # Specialists do not get the lead's learnings.
    assert all("early on breakouts" not in "\n".join(b["text"] for b in c["system"]) for c in model.calls if is_member_call(c))


def test_team_must_be_the_callers_agents(stack):
    mine = stack.agent()
    bobs = stack.agent(user="bob")
    r = stack.call("POST", "/api/agents", body={"name": "L", "team": [bobs["id"]]})
    assert r.status == 404 and r.error["field"] == "team"
    r = stack.call("POST", "/api/agents", body={"name": "L", "team": [mine["id"], mine["id"]]})
    assert r.status == 400
    r = stack.call("PATCH", f"/api/agents/{mine['id']}", body={"team": [mine["id"]]})
    assert r.status == 400
    r = stack.call("POST", "/api/agents", body={"name": "L", "team": ["../x"]})
    assert r.status in (400, 422)


def test_export_and_delete_me_cover_runs_schedules_and_run_memory(stack, model):
    import boto3

    member = stack.agent(name="Chartist")
    lead = stack.agent(name="Director", team=[member["id"]], defaultPrompt="Decide.", schedule="rate(1 hour)")
    run = stack.run_now(lead["id"], inputs={"asset": "BTC"})
    exported = stack.call("GET", "/api/me/export").data
    by_id = {a["id"]: a for a in exported["agents"]}
    keys = {(e["runId"], e["key"]) for e in by_id[lead["id"]]["runMemory"]}
    assert {(run["id"], "input:asset"), (run["id"], "task:" + member["id"])} <= keys
    assert {r["kind"] for r in exported["runs"]} >= {"manual", "council_member"}

    assert stack.call("DELETE", "/api/me").status == 200
    scheduler = boto3.client("scheduler")
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.get_schedule(Name=lead["id"], GroupName=stack.deps.settings.schedule_group)
    assert stack.call("GET", "/api/me/export").data["agents"] == []
