"""The whole local stack over real HTTP on loopback: what a user of `make dev` sees."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from engram.conversations.webhooks import sign


@pytest.fixture(scope="module")
def stack_url(live):
    return live.url.rstrip("/")


def http(url: str, method: str, path: str, *, user: str | None = "alice", body=None, raw: bytes | None = None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    if user:
        request.add_header("authorization", f"Bearer dev-{user}")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def wait_for_run(url: str, run_id: str, user: str = "alice", attempts: int = 200) -> dict:
    for _ in range(attempts):
        status, body = http(url, "GET", f"/api/runs/{run_id}", user=user)
        if body["data"]["status"] in ("succeeded", "failed"):
            return body["data"]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish: {body}")


def new_agent(url: str, user: str = "alice") -> dict:
    status, body = http(url, "POST", "/api/agents", user=user, body={"name": "Ada", "persona": "You help."})
    assert status == 201, body
    return body["data"]


def test_two_turn_conversation(stack_url):
    agent = new_agent(stack_url)
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    status, first = http(stack_url, "POST", path, body={"message": "my favourite colour is teal"})
    assert status == 200 and first["data"]["runId"]
    status, second = http(stack_url, "POST", path, body={"message": "what did I tell you?"})
    assert status == 200 and "my favourite colour is teal" in second["data"]["reply"]
    status, session = http(stack_url, "GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    assert session["data"]["messageCount"] == 4
    assert [m["role"] for m in session["data"]["messages"]] == ["user", "assistant", "user", "assistant"]


def test_two_concurrent_turns_on_one_session_keep_both_messages(stack_url):
    agent = new_agent(stack_url)
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    results: dict[str, tuple[int, dict]] = {}

    def send(text: str) -> None:
        results[text] = http(stack_url, "POST", path, body={"message": text})

    threads = [threading.Thread(target=send, args=(t,)) for t in ("from tab one", "from tab two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(status for status, _ in results.values())
    # the loser waits for the lease; were it to give up, it would say so (409), never lose a message silently
    assert all(s in (200, 409) for s in statuses)
    _, session = http(stack_url, "GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    texts = [b["text"] for m in session["data"]["messages"] if m["role"] == "user" for b in m["content"]]
    for text, (status, _) in results.items():
        assert (text in texts) == (status == 200)
    assert statuses == [200, 200]


def test_async_turn_through_the_queue(stack_url):
    agent = new_agent(stack_url)
    status, body = http(
        stack_url, "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages?async=true", body={"message": "do it later"}
    )
    assert status == 202 and body["data"]["status"] == "queued"
    run = wait_for_run(stack_url, body["data"]["runId"])
    assert run["status"] == "succeeded" and "do it later" in run["result"]["reply"]


def test_webhook_bad_signature_then_good(stack_url):
    agent = new_agent(stack_url)
    raw = json.dumps({"message": "deploy finished", "session_id": "ops"}).encode()
    ts = str(int(time.time()))
    status, body = http(
        stack_url,
        "POST",
        f"/api/agents/{agent['id']}/webhook",
        user=None,
        raw=raw,
        headers={"x-engram-timestamp": ts, "x-engram-signature": "sha256=" + "0" * 64},
    )
    assert status == 401 and body["error"]["code"] == "invalid_signature"
    status, body = http(
        stack_url,
        "POST",
        f"/api/agents/{agent['id']}/webhook",
        user=None,
        raw=raw,
        headers={"x-engram-timestamp": ts, "x-engram-signature": sign(agent["webhookSecret"], ts, raw.decode())},
    )
    assert status == 202
    run = wait_for_run(stack_url, body["data"]["runId"])
    assert run["status"] == "succeeded" and run["sessionId"] == "ops"
    _, session = http(stack_url, "GET", f"/api/agents/{agent['id']}/sessions/ops")
    assert session["data"]["messages"][0]["content"][0]["text"] == "deploy finished"


def test_auth_and_isolation_over_http(stack_url):
    agent = new_agent(stack_url, user="carol")
    status, body = http(stack_url, "GET", "/api/agents", user=None)
    assert status == 401
    status, body = http(stack_url, "GET", "/api/agents", headers={"authorization": "Bearer not-a-dev-token"}, user=None)
    assert status == 401
    status, body = http(stack_url, "GET", f"/api/agents/{agent['id']}", user="dave")
    assert status == 404 and body["error"]["field"] == "agentId"


def test_offline_model_remembers_the_user_across_sessions_over_http(stack_url):
    agent = new_agent(stack_url, user="erin")
    base = f"/api/agents/{agent['id']}/sessions"
    status, said = http(
        stack_url, "POST", f"{base}/dashboard/messages", user="erin", body={"message": "remember that I only drink green tea"}
    )
    assert status == 200 and said["data"]["toolCalls"][0]["name"] == "remember"
    http(stack_url, "POST", base, user="erin", body={"id": "monday"})
    status, answer = http(
        stack_url, "POST", f"{base}/monday/messages", user="erin", body={"message": "what do you know about me?"}
    )
    assert status == 200 and "I only drink green tea" in answer["data"]["reply"]
    status, facts = http(stack_url, "GET", "/api/me/facts", user="erin")
    assert [f["fact"] for f in facts["data"]["items"]] == ["I only drink green tea"]
    # nobody else sees it
    status, others = http(stack_url, "GET", "/api/me/facts", user="frank")
    assert others["data"]["items"] == []


def test_a_conversation_leaves_auto_memories_and_their_cost(stack_url):
    # the background workers feed the extraction queue to ExtractFunction, as Lambda would
    _, ws = http(stack_url, "POST", "/api/workspaces", user="gina", body={"name": "Billing"})
    _, created = http(
        stack_url, "POST", "/api/agents", user="gina", body={"name": "Ada", "workspaceId": ws["data"]["id"], "agentMemory": True}
    )
    agent = created["data"]
    status, said = http(
        stack_url,
        "POST",
        f"/api/agents/{agent['id']}/sessions/dashboard/messages",
        user="gina",
        body={"message": "For the billing service we use Postgres 16 and FastAPI. I prefer short answers with code."},
    )
    assert status == 200
    for _ in range(200):
        _, mems = http(stack_url, "GET", f"/api/workspaces/{ws['data']['id']}/memories", user="gina")
        if mems["data"]["items"]:
            break
        time.sleep(0.05)
    assert [(m["key"], m["source"]) for m in mems["data"]["items"]] == [("auto:uses-postgres-16-and-fastapi", "auto")]
    _, mine = http(stack_url, "GET", f"/api/agents/{agent['id']}/memories", user="gina")
    assert [m["key"] for m in mine["data"]["items"]] == ["auto:preference-short-answers-with-code"]
    _, spent = http(stack_url, "GET", f"/api/usage?agentId={agent['id']}&sessionId=memory-extract:dashboard", user="gina")
    assert [u["runId"] for u in spent["data"]["items"]] == [said["data"]["runId"]]


def test_decision_cards_with_the_offline_model(stack_url):
    """An agent with a trade-decision card and reviewDecisions: each run ends with a card, and the
    second run reviewed the first card before deciding (AM5, AM7), all without a key."""
    status, types = http(stack_url, "GET", "/api/card-types")
    assert status == 200 and {"decision", "trade-decision"} <= {c["name"] for c in types["data"]["items"]}
    status, body = http(
        stack_url, "POST", "/api/agents", body={"name": "Trader", "cardType": "trade-decision", "reviewDecisions": True}
    )
    assert status == 201, body
    agent = body["data"]
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"

    status, first = http(stack_url, "POST", path, body={"message": "analyze BTC"})
    assert status == 200, first
    assert [c["name"] for c in first["data"]["toolCalls"]] == ["get_my_decisions", "submit_result"]
    _, run = http(stack_url, "GET", f"/api/runs/{first['data']['runId']}")
    assert run["data"]["result"]["cardType"] == "trade-decision"
    card = run["data"]["result"]["card"]
    assert card["decision"] == "WAIT" and card["asset"] == "ANALYZE" and 0 <= card["confidence"] <= 100

    status, second = http(stack_url, "POST", path, body={"message": "analyze BTC again"})
    assert status == 200, second
    review = second["data"]["toolCalls"][0]
    assert review["name"] == "get_my_decisions"
    assert review["result"]["decisions"] == [f"just now · WAIT · {card['summary']}"]

    status, decisions = http(stack_url, "GET", f"/api/agents/{agent['id']}/decisions")
    assert status == 200
    assert [d["runId"] for d in decisions["data"]["items"]] == [second["data"]["runId"], first["data"]["runId"]]
    assert http(stack_url, "GET", f"/api/agents/{agent['id']}/decisions", user="bob")[0] == 404


# --- heartbeats: the schedule loop over the emulator's EventBridge Scheduler, runs via the run queue
def test_a_rate_one_minute_agent_runs_on_its_schedule(live):
    url = live.url.rstrip("/")
    status, created = http(
        url,
        "POST",
        "/api/agents",
        body={"name": "Watcher", "schedule": "rate(1 minute)", "defaultPrompt": "Check the queue depth.", "cardType": "decision"},
    )
    assert status == 201, created
    agent_id = created["data"]["id"]
    scheduler = boto3.client("scheduler", endpoint_url=live.moto_url, region_name="us-east-1")
    schedule = scheduler.get_schedule(Name=agent_id, GroupName=live.env["SCHEDULE_GROUP"])
    assert schedule["ScheduleExpression"] == "rate(1 minute)"

    assert live.fire_schedules(datetime.now(UTC) + timedelta(seconds=30)) == []  # not due yet
    fired = live.fire_schedules(schedule["CreationDate"] + timedelta(seconds=61))
    assert len(fired) == 1 and fired[0]["agentId"] == agent_id
    runs = http(url, "GET", f"/api/agents/{agent_id}/runs")[1]["data"]["items"]
    assert [(r["kind"], r["trigger"], r["status"]) for r in runs] == [("heartbeat", "schedule", "succeeded")]
    assert runs[0]["prompt"].startswith("Check the queue depth.") and runs[0]["result"]["card"]["decision"]
    assert live.fire_schedules(schedule["CreationDate"] + timedelta(seconds=62)) == []  # that minute already ran

    status, _ = http(url, "PATCH", f"/api/agents/{agent_id}", body={"schedule": None})
    assert status == 200
    assert live.fire_schedules(schedule["CreationDate"] + timedelta(seconds=200)) == []


def test_reexamination_over_http(live):
    url = live.url.rstrip("/")
    agent_id = http(
        url,
        "POST",
        "/api/agents",
        body={"name": "Trader", "cardType": "trade-decision", "defaultPrompt": "Analyse BTC.", "reviewDecisions": True},
    )[1]["data"]["id"]
    status, started = http(url, "POST", f"/api/agents/{agent_id}/runs", body={})
    assert status == 202 and started["data"]["status"] == "queued"
    parent = wait_for_run(url, started["data"]["runId"])
    assert parent["status"] == "succeeded" and parent["result"]["card"]["decision"] == "WAIT"

    status, child = http(url, "POST", f"/api/runs/{parent['id']}/re-examine")
    assert status == 202 and child["data"]["parentRunId"] == parent["id"]
    child = wait_for_run(url, child["data"]["runId"])
    assert child["status"] == "succeeded" and child["result"]["card"]["suggested_action"] in ("HOLD", "CLOSE", "SCALE")
    history = http(url, "GET", f"/api/runs/{parent['id']}/re-examinations")[1]["data"]["items"]
    assert [r["id"] for r in history] == [child["id"]]
    assert (
        http(url, "GET", f"/api/runs/{parent['id']}")[1]["data"]["latestConviction"]
        == child["result"]["card"]["conviction_score"]
    )

    assert http(url, "PATCH", f"/api/runs/{parent['id']}", body={"resolutionStatus": "resolved"})[0] == 200
    status, refused = http(url, "POST", f"/api/runs/{parent['id']}/re-examine")
    assert status == 409 and refused["error"]["code"] == "decision_resolved"
