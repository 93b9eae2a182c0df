"""Sessions and chat turns through the api and chat functions against moto."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from engram.engine.providers.base import ModelResponse, TokenCounts
from engram.engine.tools import Tool
from engram.engine.trim import sequence_problems
from engram.kernel.errors import ProviderError


def test_dashboard_exists_and_sessions_can_be_created_listed_read_deleted(stack):
    agent = stack.agent()
    base = f"/api/agents/{agent['id']}/sessions"
    listed = stack.call("GET", base).data["items"]
    assert [s["id"] for s in listed] == ["dashboard"]

    made = stack.call("POST", base, body={"id": "research", "title": "Research"})
    assert made.status == 201 and made.data["id"] == "research" and made.data["messageCount"] == 0
    generated = stack.call("POST", base, body={})
    assert generated.status == 201 and generated.data["id"].startswith("s_")
    dup = stack.call("POST", base, body={"id": "research"})
    assert dup.status == 409 and dup.error["code"] == "session_exists"
    assert {s["id"] for s in stack.call("GET", base).data["items"]} == {"dashboard", "research", generated.data["id"]}

    stack.say(agent["id"], "first words", session="research")
    one = stack.call("GET", f"{base}/research")
    assert one.data["messageCount"] == 2 and one.data["title"] == "Research"
    assert one.data["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "first words"}]}

    assert stack.call("DELETE", f"{base}/research").status == 200
    assert stack.call("GET", f"{base}/research").status == 404
    assert stack.transcript_bytes("alice", agent["id"], "research") is None


def test_deleting_dashboard_empties_it(stack):
    agent = stack.agent()
    stack.say(agent["id"], "hello")
    assert stack.call("DELETE", f"/api/agents/{agent['id']}/sessions/dashboard").status == 200
    again = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    assert again.status == 200 and again.data["messages"] == [] and again.data["messageCount"] == 0


@pytest.mark.parametrize(
    "body, field", [({"id": "../x"}, "id"), ({"id": "x" * 65}, "id"), ({"title": "t" * 201}, "title"), ({"extra": 1}, "extra")]
)
def test_bad_session_bodies(stack, body, field):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/sessions", body=body)
    assert r.status == 400 and r.error["field"] == field


def test_sessions_of_unknown_or_foreign_agents_are_404(stack):
    agent = stack.agent(user="alice")
    for method, path, body in [
        ("GET", f"/api/agents/{agent['id']}/sessions", None),
        ("POST", f"/api/agents/{agent['id']}/sessions", {"id": "x"}),
        ("GET", f"/api/agents/{agent['id']}/sessions/dashboard", None),
        ("DELETE", f"/api/agents/{agent['id']}/sessions/dashboard", None),
        ("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "hi"}),
    ]:
        r = stack.call(method, path, user="bob", body=body)
        assert r.status == 404, (method, path, r.body)
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 0


def test_two_turns_keep_history_in_anthropic_shapes(stack):
    agent = stack.agent()
    first = stack.say(agent["id"], "my name is Grace")
    assert first.status == 200
    assert set(first.data) == {"runId", "sessionId", "reply", "toolCalls", "usage"}
    assert set(first.data["usage"]) == {
        "inputTokens",
        "outputTokens",
        "cacheReadTokens",
        "cacheWriteTokens",
        "costUsd",
        "cacheSavingsUsd",
    }
    second = stack.say(agent["id"], "what time is it?")
    assert second.data["toolCalls"][0]["name"] == "get_current_time"
    assert "utc" in second.data["toolCalls"][0]["result"]
    third = stack.say(agent["id"], "what did I say first?")
    assert 'the first was: "my name is Grace"' in third.data["reply"]  # the model saw the history

    messages = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert sequence_problems(messages) == []
    kinds = [[b["type"] for b in m["content"]] for m in messages]
    assert kinds == [["text"], ["text"], ["text"], ["text", "tool_use"], ["tool_result"], ["text"], ["text"], ["text"]]
    tool_use = messages[3]["content"][1]
    assert set(tool_use) >= {"id", "name", "input"} and messages[4]["content"][0]["tool_use_id"] == tool_use["id"]
    assert all("cache_control" not in b for m in messages for b in m["content"])  # request-only markers never stored


def test_history_is_capped_without_splitting_tool_pairs(stack, monkeypatch):
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 4})
    agent = stack.agent()
    for text in ["one", "what time is it?", "two", "what time is it?", "three"]:
        assert stack.say(agent["id"], text).status == 200
    data = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert len(data["messages"]) <= 4 and data["messageCount"] == len(data["messages"])
    assert sequence_problems(data["messages"]) == []
    assert data["messages"][-2]["content"][0]["text"] == "three"


def test_message_validation(stack):
    agent = stack.agent()
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    assert stack.call("POST", path, body={"message": ""}).error["field"] == "message"
    assert stack.call("POST", path, body={"message": 12}).error["field"] == "message"
    assert stack.call("POST", path, body={}).error["field"] == "message"
    too_long = stack.call("POST", path, body={"message": "x" * 40_000})
    assert too_long.status == 413 and too_long.error["field"] == "message"
    unknown = stack.call("POST", f"/api/agents/{agent['id']}/sessions/nope/messages", body={"message": "hi"})
    assert unknown.status == 404 and unknown.error["field"] == "sessionId"
    bad_id = stack.call("POST", f"/api/agents/{agent['id']}/sessions/a.b/messages", body={"message": "hi"})
    assert bad_id.status == 400 and bad_id.error["field"] == "sessionId"
    assert stack.call("GET", f"/api/agents/{agent['id']}/runs").data["items"] == []


def test_runs_and_usage_are_recorded(stack):
    agent = stack.agent()
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "other"})
    turn = stack.say(agent["id"], "hello").data
    stack.say(agent["id"], "hello again", session="other")

    run = stack.call("GET", f"/api/runs/{turn['runId']}").data
    assert run["status"] == "succeeded" and run["kind"] == "chat" and run["sessionId"] == "dashboard"
    assert run["sessionRevisionBefore"] == 0 and run["sessionRevisionAfter"] == 1
    assert run["usage"] == turn["usage"] and run["prompt"] == "hello"
    assert len(stack.call("GET", f"/api/agents/{agent['id']}/runs").data["items"]) == 2

    all_rows = stack.call("GET", "/api/usage", query={"agentId": agent["id"]}).data
    assert len(all_rows["items"]) == 2
    dash = stack.call("GET", "/api/usage", query={"agentId": agent["id"], "sessionId": "dashboard"}).data
    assert [r["runId"] for r in dash["items"]] == [turn["runId"]]
    assert dash["totals"]["inputTokens"] == turn["usage"]["inputTokens"]
    assert stack.call("GET", "/api/usage", query={"sessionId": "dashboard"}).error["field"] == "agentId"
    assert stack.call("GET", "/api/usage", user="bob").data["items"] == []
    assert stack.call("GET", f"/api/runs/{turn['runId']}", user="bob").status == 404


def test_a_finished_turn_enqueues_an_extraction_job(stack):
    agent = stack.agent(agentMemory=True)
    run_id = stack.say(agent["id"], "I prefer tea").data["runId"]
    jobs = stack.queue_messages(stack.deps.settings.extract_queue_url)
    assert [j["runId"] for j in jobs] == [run_id]
    assert jobs[0]["agentId"] == agent["id"] and jobs[0]["sessionId"] == "dashboard"
    assert jobs[0]["messages"][0]["content"][0]["text"] == "I prefer tea"


# --- failures leave history exactly as it was -------------------------------------------------
class FailingProvider:
    name = "failing"

    def __init__(self, err):
        self.err = err

    def complete(self, **kwargs):
        raise self.err


def _history_then(stack, agent_id):
    assert stack.say(agent_id, "keep me").status == 200
    return stack.transcript_bytes("alice", agent_id)


def test_provider_failure_leaves_history_and_records_failed_run(stack):
    agent = stack.agent()
    before = _history_then(stack, agent["id"])
    stack.deps.provider_override = FailingProvider(ProviderError("the model provider answered 529: Overloaded"))
    r = stack.say(agent["id"], "this will fail")
    assert r.status == 502 and r.error["code"] == "model_error" and r.error["runId"]
    assert stack.transcript_bytes("alice", agent["id"]) == before
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "model_error"
    assert run["sessionRevisionBefore"] == run["sessionRevisionAfter"] == 1
    stack.deps.provider_override = None
    ok = stack.say(agent["id"], "and now?")  # the next turn starts from the last good state
    assert ok.status == 200 and "2 earlier message(s)" not in ok.data["reply"]
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 4


def test_crashing_tool_fails_the_turn_and_keeps_history(stack):
    class In(BaseModel):
        pass

    def explode(ctx, _input):
        raise RuntimeError("disk on fire")

    stack.deps.registry.register(
        Tool("explode", "explodes", In, explode, offline_intent=lambda t: {} if "explode" in t else None)
    )
    agent = stack.agent()
    before = _history_then(stack, agent["id"])
    r = stack.say(agent["id"], "please explode")
    assert r.status == 500 and r.error["code"] == "tool_failed" and "explode" in r.error["message"]
    assert "disk on fire" not in str(r.body)  # the exception's text is for the logs only
    assert stack.transcript_bytes("alice", agent["id"]) == before
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and run["usage"]["inputTokens"] > 0  # tokens spent are still counted
    assert stack.say(agent["id"], "still there?").status == 200


def test_turn_past_its_budget_fails_cleanly(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": 0.5})
    agent = stack.agent()
    r = stack.say(agent["id"], "hello")
    assert r.status == 504 and r.error["code"] == "turn_timeout"
    assert "?async=true" in r.error["message"] and "/api/stream-tickets" in r.error["message"]  # how to run it long (ST1)
    assert stack.transcript_bytes("alice", agent["id"]) is None
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 0


def test_busy_session_is_409_not_a_lost_message(stack):
    agent = stack.agent()
    from engram.kernel.ids import tenant_key

    stack.deps.sessions.acquire_lease(tenant_key("alice"), agent["id"], "dashboard", "run_other", 30)
    r = stack.say(agent["id"], "hello")
    assert r.status == 409 and r.error["code"] == "session_busy"
    assert stack.call("DELETE", f"/api/agents/{agent['id']}/sessions/dashboard").status == 409


def test_a_concurrent_write_is_never_overwritten(stack):
    """If the transcript changes under a turn (lease bypassed), the conditional PUT refuses."""
    agent = stack.agent()
    assert stack.say(agent["id"], "first").status == 200
    from engram.aws.keys import session_object
    from engram.kernel.ids import tenant_key

    key = session_object(tenant_key("alice"), agent["id"], "dashboard")
    bucket = stack.deps.settings.bucket_name

    class Sneaky:
        name = "sneaky"

        def complete(self, **kwargs):
            stack.s3.put_object(Bucket=bucket, Key=key, Body=json.dumps({"version": 1, "messages": ["other writer"]}).encode())
            return ModelResponse(
                content=[{"type": "text", "text": "ok"}], stop_reason="end_turn", model="offline", tokens=TokenCounts(1, 1)
            )

    stack.deps.provider_override = Sneaky()
    r = stack.say(agent["id"], "second")
    assert r.status == 409 and r.error["code"] == "session_busy"
    assert json.loads(stack.transcript_bytes("alice", agent["id"]))["messages"] == ["other writer"]


# --- async turns and webhooks ----------------------------------------------------------------
def test_async_turn_goes_through_the_queue(stack):
    agent = stack.agent()
    r = stack.call(
        "POST",
        f"/api/agents/{agent['id']}/sessions/dashboard/messages",
        body={"message": "later please"},
        query={"async": "true"},
    )
    assert r.status == 202 and r.data["status"] == "queued"
    assert stack.call("GET", f"/api/runs/{r.data['runId']}").data["status"] == "queued"
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "succeeded" and "later please" in run["result"]["reply"]
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 2


def test_redelivered_turn_job_does_not_run_twice(stack):
    from engram.conversations.chat import process_turn_job
    from engram.conversations.models import TurnJob
    from engram.kernel.ids import tenant_key

    agent = stack.agent()
    r = stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "once"}, query={"async": "true"}
    )
    stack.drain_turns()
    job = TurnJob(
        run_id=r.data["runId"], tenant=tenant_key("alice"), agent_id=agent["id"], session_id="dashboard", message="once"
    )
    process_turn_job(stack.deps, job)
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 2


def test_webhook_signatures(stack):
    agent = stack.agent()
    secret = agent["webhookSecret"]
    assert stack.webhook(agent["id"], secret, {"message": "hi"}, signature="sha256=" + "0" * 64).status == 401
    assert stack.webhook(agent["id"], "wrong-secret", {"message": "hi"}).status == 401
    stale = stack.webhook(agent["id"], secret, {"message": "hi"}, timestamp=int(time.time()) - 3600)
    assert stale.status == 401 and stale.error["code"] == "stale_signature"
    assert stack.webhook("ag_unknown", secret, {"message": "hi"}).status == 401
    assert stack.call("POST", f"/api/agents/{agent['id']}/webhook", user=None, body={"message": "hi"}).status == 401
    assert stack.call("GET", f"/api/agents/{agent['id']}/runs").data["items"] == []

    bad = stack.webhook(agent["id"], secret, {"message": ""})
    assert bad.status == 400 and bad.error["field"] == "message"

    ok = stack.webhook(agent["id"], secret, {"message": "build finished", "session_id": "ci"})
    assert ok.status == 202 and ok.data["sessionId"] == "ci"
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{ok.data['runId']}").data
    assert run["status"] == "succeeded" and run["trigger"] == "webhook"
    ci = stack.call("GET", f"/api/agents/{agent['id']}/sessions/ci").data
    assert ci["messages"][0]["content"][0]["text"] == "build finished"

    default = stack.webhook(agent["id"], secret, {"message": "to the dashboard"})
    assert default.data["sessionId"] == "dashboard"


def test_no_extraction_job_when_there_is_nowhere_to_store(stack):
    agent = stack.agent()  # no workspace, agentMemory off: extraction could store nothing
    assert stack.say(agent["id"], "I prefer tea").status == 200
    assert stack.queue_messages(stack.deps.settings.extract_queue_url) == []


def test_the_session_names_the_run_its_transcript_reflects(stack):
    """`lastRunId`: the run whose commit the transcript reflects (a page showing a turn live knows
    from it that the turn's reply is in the transcript). A queued or failed turn leaves it as it
    was; a chat turn and a manual run on the shared session each move it on, in time order."""
    agent = stack.agent(defaultPrompt="Check in.", activeMemory=True)
    path = f"/api/agents/{agent['id']}/sessions/dashboard"
    assert stack.call("GET", path).data["lastRunId"] is None  # no turn yet

    chat = stack.say(agent["id"], "first words")
    assert chat.status == 200
    assert stack.call("GET", path).data["lastRunId"] == chat.data["runId"]

    stack.deps.provider_override = FailingProvider(ProviderError("the model provider answered 529: Overloaded"))
    failed = stack.say(agent["id"], "this will fail")
    stack.deps.provider_override = None
    assert failed.status == 502
    assert stack.call("GET", path).data["lastRunId"] == chat.data["runId"]  # nothing committed

    queued = stack.call("POST", f"{path}/messages", body={"message": "later please"}, query={"async": "true"})
    assert queued.status == 202
    assert stack.call("GET", path).data["lastRunId"] == chat.data["runId"]  # not run yet
    stack.drain_turns()
    session = stack.call("GET", path).data
    assert session["lastRunId"] == queued.data["runId"] and "later please" in json.dumps(session["messages"])

    manual = stack.run_now(agent["id"], prompt="Look around.")
    assert manual["sessionId"] == "dashboard" and manual["status"] == "succeeded"
    assert stack.call("GET", path).data["lastRunId"] == manual["id"]
    assert chat.data["runId"] < queued.data["runId"] < manual["id"]  # run ids sort by time

    other = stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "quiet"})
    assert other.status == 201 and "lastRunId" not in other.data  # the listed shape is unchanged
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/quiet").data["lastRunId"] is None
