"""Scheduled heartbeats, manual runs and Active Memory (AM1-AM4), against moto with the resources
of template.yaml: the API creates EventBridge Scheduler schedules, the heartbeat function runs the
firings (at least once) and the run queue's jobs."""

from __future__ import annotations

import json

import boto3
import pytest

from engram.kernel.ids import tenant_key

DEFAULT = "Check BTC and report."


@pytest.fixture
def scheduler(stack):
    return boto3.client("scheduler")


def _schedule(stack, scheduler, agent_id):
    try:
        return scheduler.get_schedule(Name=agent_id, GroupName=stack.deps.settings.schedule_group)
    except scheduler.exceptions.ResourceNotFoundException:
        return None


# --- schedules ------------------------------------------------------------------------------
def test_schedule_follows_the_agent(stack, scheduler):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    s = _schedule(stack, scheduler, agent["id"])
    assert s is not None and s["ScheduleExpression"] == "rate(1 hour)"
    target_input = json.loads(s["Target"]["Input"])
    assert target_input["tenant"] == tenant_key("alice") and target_input["agentId"] == agent["id"]
    assert target_input["scheduledTime"] == "<aws.scheduler.scheduled-time>"
    assert s["Target"]["RetryPolicy"]["MaximumRetryAttempts"] >= 1 and s["Target"]["DeadLetterConfig"]["Arn"]

    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"schedule": "cron(0 9 * * ? *)"})
    assert r.status == 200 and r.data["schedule"] == "cron(0 9 * * ? *)"
    assert _schedule(stack, scheduler, agent["id"])["ScheduleExpression"] == "cron(0 9 * * ? *)"

    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"schedule": None})
    assert r.status == 200 and r.data["schedule"] is None
    assert _schedule(stack, scheduler, agent["id"]) is None

    stack.call("PATCH", f"/api/agents/{agent['id']}", body={"schedule": "rate(5 minutes)"})
    assert _schedule(stack, scheduler, agent["id"]) is not None
    assert stack.call("DELETE", f"/api/agents/{agent['id']}").status == 200
    assert _schedule(stack, scheduler, agent["id"]) is None


def test_schedule_needs_a_default_prompt_and_a_valid_expression(stack, scheduler):
    r = stack.call("POST", "/api/agents", body={"name": "x", "schedule": "rate(1 hour)"})
    assert r.status == 400 and r.error["field"] == "defaultPrompt"
    r = stack.call("POST", "/api/agents", body={"name": "x", "schedule": "every hour", "defaultPrompt": DEFAULT})
    assert r.status == 400 and "schedule" in json.dumps(r.error)
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"defaultPrompt": ""})
    assert r.status == 400 and r.error["field"] == "defaultPrompt"
    assert _schedule(stack, scheduler, agent["id"])["ScheduleExpression"] == "rate(1 hour)"  # unchanged


def test_a_firing_runs_the_agent_once_with_its_scheduled_prompt(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    when = stack.at(0)
    first = stack.fire(agent["id"], when)
    assert first["status"] == "succeeded"
    again = stack.fire(agent["id"], when)  # the scheduler delivers at least once
    assert again["status"] == "duplicate" and again["runId"] == first["runId"]
    runs = stack.runs(agent["id"])
    assert len(runs) == 1
    run = runs[0]
    assert run["kind"] == "heartbeat" and run["trigger"] == "schedule" and run["status"] == "succeeded"
    assert run["prompt"].startswith(DEFAULT) and run["sessionId"] is None
    assert run["usage"]["inputTokens"] > 0
    stack.fire(agent["id"], stack.at(1))
    assert len(stack.runs(agent["id"])) == 2
    usage = stack.call("GET", "/api/usage", query={"agentId": agent["id"]}).data["items"]
    assert {u["runId"] for u in usage} == {r["id"] for r in stack.runs(agent["id"])}


def test_firings_for_deleted_or_unscheduled_agents_run_nothing(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    stack.call("PATCH", f"/api/agents/{agent['id']}", body={"schedule": None})
    assert stack.fire(agent["id"])["status"] == "ignored"
    assert stack.runs(agent["id"]) == []
    assert stack.fire("ag_missing")["status"] == "ignored"
    bad = stack.functions["HeartbeatFunction"].invoke({"tenant": "../x", "agentId": agent["id"], "scheduledTime": "now"})
    assert bad["status"] == "ignored"


# --- manual runs -------------------------------------------------------------------------------
def test_manual_run_with_default_prompt_or_override(stack):
    agent = stack.agent(defaultPrompt=DEFAULT)
    run = stack.run_now(agent["id"])
    assert run["kind"] == "manual" and run["status"] == "succeeded" and run["prompt"].startswith(DEFAULT)
    assert run["result"]["reply"]
    run = stack.run_now(agent["id"], prompt="Just say hi.")
    assert run["prompt"].startswith("Just say hi.") and "Just say hi." in run["result"]["reply"]


def test_manual_run_bad_input(stack):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={})
    assert r.status == 400 and r.error["field"] == "prompt"
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": 5})
    assert r.status in (400, 422)
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "x", "surprise": 1})
    assert r.status in (400, 422)
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "x", "inputs": {"../etc": 1}})
    assert r.status in (400, 422)
    assert stack.call("POST", "/api/agents/ag_nope/runs", body={"prompt": "x"}).status == 404
    assert stack.call("POST", f"/api/agents/{agent['id']}/runs", user="bob", body={"prompt": "x"}).status == 404
    assert stack.call("POST", f"/api/agents/{agent['id']}/runs", user=None, body={"prompt": "x"}).status == 401
    assert stack.runs(agent["id"]) == []


def test_a_redelivered_run_job_runs_nothing_twice(stack):
    agent = stack.agent(defaultPrompt=DEFAULT)
    run = stack.run_now(agent["id"])
    from engram.runs.execution import process_run_job
    from engram.runs.models import RunJob

    process_run_job(stack.deps, RunJob(tenant=tenant_key("alice"), run_id=run["id"]))
    assert len(stack.runs(agent["id"])) == 1
    assert stack.call("GET", f"/api/runs/{run['id']}").data["updatedAt"] == run["updatedAt"]


# --- Active Memory -------------------------------------------------------------------------------
def _panel(stack, agent_id):
    r = stack.call("GET", f"/api/agents/{agent_id}/active-memory")
    assert r.status == 200, r.body
    return r.data


def test_active_memory_off_heartbeats_are_a_clean_slate(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    assert stack.say(agent["id"], "hello from chat").status == 200
    before = stack.transcript_bytes("alice", agent["id"])
    stack.fire(agent["id"])
    run = stack.runs(agent["id"])[0]
    assert run["kind"] == "heartbeat" and "first message of this session" in run["result"]["reply"]
    assert "hello from chat" not in run["result"]["reply"]
    assert run["sessionId"] is None and run["sessionRevisionBefore"] is None
    assert stack.transcript_bytes("alice", agent["id"]) == before  # chat history untouched
    panel = _panel(stack, agent["id"])
    assert panel["enabled"] is False and panel["runsSinceReset"] == 0


def test_active_memory_on_chat_and_heartbeats_share_the_main_session(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT, activeMemory=True)
    panel = _panel(stack, agent["id"])
    assert panel["enabled"] and panel["status"] == "fresh" and panel["runsSinceReset"] == 0
    assert stack.say(agent["id"], "next run just say hi").status == 200
    assert _panel(stack, agent["id"])["status"] == "carrying_context"

    stack.fire(agent["id"])
    heartbeat = stack.runs(agent["id"])[0]
    assert heartbeat["kind"] == "heartbeat" and heartbeat["sessionId"] == "dashboard"
    assert 'the first was: "next run just say hi"' in heartbeat["result"]["reply"]  # it saw the chat
    assert heartbeat["prompt"].startswith(DEFAULT)  # and still followed its scheduled prompt (AM4)
    assert heartbeat["sessionRevisionBefore"] == 1 and heartbeat["sessionRevisionAfter"] == 2

    reply = stack.say(agent["id"], "what happened?").data["reply"]
    assert "2 earlier message(s)" in reply  # the next chat sees the heartbeat's prompt
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert any(DEFAULT in json.dumps(m) for m in session["messages"])
    panel = _panel(stack, agent["id"])
    assert panel["runsSinceReset"] == 1 and panel["status"] == "carrying_context" and panel["warning"] is None
    assert panel["sessionAgeSeconds"] is not None and panel["sessionAgeSeconds"] >= 0


def test_reset_starts_fresh_while_the_messages_stay_visible(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT, activeMemory=True)
    stack.say(agent["id"], "hello from chat")
    stack.fire(agent["id"])
    messages_before = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    r = stack.call("POST", f"/api/agents/{agent['id']}/active-memory/reset")
    assert r.status == 200 and r.data["status"] == "fresh" and r.data["runsSinceReset"] == 0 and r.data["lastResetAt"]
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"] == messages_before

    stack.fire(agent["id"], stack.at(1))
    newest = stack.runs(agent["id"])[0]
    assert "first message of this session" in newest["result"]["reply"]  # context started fresh
    after = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert after[: len(messages_before)] == messages_before and len(after) > len(messages_before)
    panel = _panel(stack, agent["id"])
    assert panel["runsSinceReset"] == 1 and panel["status"] == "carrying_context"


def test_enable_is_a_reset_disable_keeps_data_unused_reenable_is_fresh(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    stack.say(agent["id"], "hello from chat")
    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"activeMemory": True}).status == 200
    panel = _panel(stack, agent["id"])
    assert panel["status"] == "fresh" and panel["lastResetAt"]  # enabling is a reset
    stack.fire(agent["id"], stack.at(0))
    assert "first message of this session" in stack.runs(agent["id"])[0]["result"]["reply"]
    stack.fire(agent["id"], stack.at(1))
    assert "1 earlier message(s)" in stack.runs(agent["id"])[0]["result"]["reply"]

    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"activeMemory": False}).status == 200
    kept = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    stack.fire(agent["id"], stack.at(2))
    off_run = stack.runs(agent["id"])[0]
    assert off_run["sessionId"] is None and "first message of this session" in off_run["result"]["reply"]
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"] == kept  # kept, unused
    assert _panel(stack, agent["id"])["runsSinceReset"] == 2

    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"activeMemory": True}).status == 200
    assert _panel(stack, agent["id"])["status"] == "fresh"
    stack.fire(agent["id"], stack.at(3))
    assert "first message of this session" in stack.runs(agent["id"])[0]["result"]["reply"]


def test_the_panel_warns_past_twenty_runs(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT, activeMemory=True)
    for hour in range(21):
        stack.fire(agent["id"], stack.at(hour))
        if hour == 19:
            assert _panel(stack, agent["id"])["warning"] is None  # 20 runs: not past 20 yet
    panel = _panel(stack, agent["id"])
    assert panel["runsSinceReset"] == 21 and "reset" in panel["warning"]
    stack.call("POST", f"/api/agents/{agent['id']}/active-memory/reset")
    assert _panel(stack, agent["id"])["warning"] is None


def test_a_manual_run_with_active_memory_uses_the_session_and_a_chat_turn_is_not_counted(stack):
    agent = stack.agent(defaultPrompt=DEFAULT, activeMemory=True)
    stack.say(agent["id"], "hello from chat")
    run = stack.run_now(agent["id"], prompt="Override for now.")
    assert run["sessionId"] == "dashboard" and 'the first was: "hello from chat"' in run["result"]["reply"]
    assert _panel(stack, agent["id"])["runsSinceReset"] == 1


def test_active_memory_endpoints_are_per_user(stack):
    agent = stack.agent(activeMemory=True)
    assert stack.call("GET", f"/api/agents/{agent['id']}/active-memory", user="bob").status == 404
    assert stack.call("POST", f"/api/agents/{agent['id']}/active-memory/reset", user="bob").status == 404
    assert stack.call("GET", "/api/agents/..%2Fx/active-memory").status in (400, 404)
    assert stack.call("GET", "/api/agents/ag_missing/active-memory").status == 404


def test_a_run_waits_for_a_busy_shared_session_then_is_sent_again(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"run_session_wait_s": 0})
    agent = stack.agent(defaultPrompt=DEFAULT, activeMemory=True)
    t = tenant_key("alice")
    stack.deps.sessions.acquire_lease(t, agent["id"], "dashboard", "someone-else", 300)  # a long chat turn
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={})
    from engram.runs.execution import process_run_job
    from engram.runs.models import RunJob

    (job,) = stack.queue_messages(stack.resources.queue_url("RunQueue"))
    process_run_job(stack.deps, RunJob.model_validate(job))  # what the heartbeat function does with the message
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "queued"  # given back, not failed and not run
    attrs = stack.sqs.get_queue_attributes(
        QueueUrl=stack.resources.queue_url("RunQueue"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "1"  # sent again, with a delay

    stack.deps.sessions.release_lease(t, agent["id"], "dashboard", "someone-else")
    process_run_job(stack.deps, RunJob(tenant=t, run_id=run["id"], attempt=2))
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "succeeded"


def test_a_run_that_never_gets_the_session_fails_cleanly(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"run_session_wait_s": 0})
    agent = stack.agent(defaultPrompt=DEFAULT, activeMemory=True)
    t = tenant_key("alice")
    before = stack.transcript_bytes("alice", agent["id"])
    stack.deps.sessions.acquire_lease(t, agent["id"], "dashboard", "someone-else", 300)
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={})
    from engram.runs.execution import process_run_job
    from engram.runs.models import RunJob

    process_run_job(stack.deps, RunJob(tenant=t, run_id=r.data["runId"], attempt=5))
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "session_busy"
    assert stack.transcript_bytes("alice", agent["id"]) == before


# --- extraction after runs -------------------------------------------------------------------------
def _extract_jobs(stack):
    return stack.queue_messages(stack.resources.queue_url("ExtractQueue"))


def test_runs_get_extraction_jobs_like_chat_turns(stack):
    ws = stack.call("POST", "/api/workspaces", body={"name": "Desk"}).data
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt="We use Postgres 16 for billing; check it.", workspaceId=ws["id"])
    fired = stack.fire(agent["id"])
    (job,) = _extract_jobs(stack)
    assert job["runId"] == fired["runId"] and job["kind"] == "heartbeat"
    assert job["sessionId"] == fired["runId"]  # a clean-slate run is its own session (memory-extract:<runId>)
    assert "Postgres 16" in json.dumps(job["messages"])

    member = stack.agent(name="Analyst", workspaceId=ws["id"])
    lead = stack.agent(name="Director", team=[member["id"]], defaultPrompt="Decide.", workspaceId=ws["id"])
    run = stack.run_now(lead["id"])
    jobs = _extract_jobs(stack)
    assert [j["runId"] for j in jobs] == [run["id"]]  # one job for the whole council: members are not extracted alone
    assert jobs[0]["chainId"] == run["id"][-8:] and "[Analyst" in json.dumps(jobs[0]["messages"])


def test_a_chain_extraction_records_its_cost_under_the_chain(stack):
    from local.workers import Workers

    ws = stack.call("POST", "/api/workspaces", body={"name": "Desk"}).data
    member = stack.agent(name="Analyst", workspaceId=ws["id"])
    lead = stack.agent(
        name="Director",
        team=[member["id"]],
        workspaceId=ws["id"],
        defaultPrompt="Decide. For context: we use Kafka for the order events and our deploy command is make ship.",
    )
    run = stack.run_now(lead["id"])
    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
    key = f"memory-extract:chain:{run['id'][-8:]}"
    rows = stack.call("GET", "/api/usage", query={"agentId": lead["id"], "sessionId": key}).data["items"]
    assert [r["runId"] for r in rows] == [run["id"]]


def test_a_refused_agent_leaves_no_schedule_behind(stack, scheduler):
    r = stack.call(
        "POST",
        "/api/agents",
        body={"name": "x", "schedule": "rate(1 hour)", "defaultPrompt": DEFAULT, "workspaceId": "ws_missing"},
    )
    assert r.status == 404 and r.error["field"] == "workspaceId"
    group = stack.deps.settings.schedule_group
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == []
    agent = stack.agent()
    r = stack.call(
        "PATCH",
        f"/api/agents/{agent['id']}",
        body={"schedule": "rate(1 hour)", "defaultPrompt": DEFAULT, "workspaceId": "ws_missing"},
    )
    assert r.status == 404 and _schedule(stack, scheduler, agent["id"]) is None


def test_scheduled_and_manual_prompts_are_marked_in_the_session_and_never_sent_to_the_model(stack, monkeypatch):
    from engram.engine.providers.offline import OfflineProvider

    sent: list[dict] = []
    complete = OfflineProvider.complete

    def recording(self, **kwargs):
        sent.extend(kwargs["messages"])
        return complete(self, **kwargs)

    monkeypatch.setattr(OfflineProvider, "complete", recording)
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT, activeMemory=True)
    stack.say(agent["id"], "hello from chat")
    stack.fire(agent["id"])
    manual = stack.run_now(agent["id"], prompt="Override for now.")
    stack.say(agent["id"], "and again")
    heartbeat = next(r for r in stack.runs(agent["id"]) if r["kind"] == "heartbeat")
    messages = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    prompts = [
        (m["content"][0]["text"], m.get("meta"))
        for m in messages
        if m["role"] == "user" and m["content"][0].get("type") == "text"
    ]
    assert prompts[0] == ("hello from chat", None)
    assert prompts[1][0].startswith(DEFAULT)
    assert prompts[1][1] == {"kind": "heartbeat", "trigger": "schedule", "runId": heartbeat["id"]}
    assert prompts[2] == ("Override for now.", {"kind": "manual", "trigger": "api", "runId": manual["id"]})
    assert prompts[3] == ("and again", None)
    assert sent and all(set(m) == {"role", "content"} for m in sent)  # the model never gets `meta`
