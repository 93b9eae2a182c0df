"""Faults at the AWS clients under the local stack, seen over HTTP (tests/faults.py): the stack's
functions run in this process, so the injected faults reach them as they would in Lambda."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from engram.kernel.ids import tenant_key
from local.stack import start_stack
from smoke import main as smoke_main
from tests.e2e.test_local_stack_http import http, new_agent
from tests.faults import LOST, REFUSED, STALL, Faults

BUDGET_S = 4.0  # a short sync budget, so a stall outlasts it quickly; offline turns take ~0.1 s, but a loaded
# CI machine (load 6 on 2 cores) once took the turn after the stall past a 2 s budget


@pytest.fixture(scope="module")
def url():
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SYNC_TURN_BUDGET_SECONDS", str(BUDGET_S))
        handle = start_stack(port=0, model_provider="offline", retry_delay=1)
        try:
            yield handle.url.rstrip("/")
        finally:
            handle.stop()


def about(agent_id: str) -> Any:
    """Only calls that concern this agent (the stack's background workers run meanwhile)."""
    return lambda params: agent_id in json.dumps(params, default=str)


def session(url: str, agent_id: str) -> dict[str, Any]:
    status, body = http(url, "GET", f"/api/agents/{agent_id}/sessions/dashboard")
    assert status == 200, body
    return body["data"]


def test_a_lost_commit_response_over_http_is_one_committed_turn(url, faults: Faults):
    agent = new_agent(url)
    faults.add("dynamodb", "TransactWriteItems", LOST, when=about(agent["id"]))
    status, body = http(url, "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hello"})
    assert status == 200, body
    assert faults.injected == [("dynamodb", "TransactWriteItems", LOST)]
    data = session(url, agent["id"])
    assert data["messageCount"] == 2 and data["revision"] == 1 and len(data["messages"]) == 2
    status, run = http(url, "GET", f"/api/runs/{body['data']['runId']}")
    assert run["data"]["status"] == "succeeded"


def test_a_refused_commit_over_http_leaves_the_session_as_it_was_and_free(url, faults: Faults):
    agent = new_agent(url)
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    faults.add("dynamodb", "TransactWriteItems", REFUSED, when=about(agent["id"]))
    status, body = http(url, "POST", path, body={"message": "hello"})
    assert status == 503 and body["error"]["code"] == "storage_unavailable", body
    status, run = http(url, "GET", f"/api/runs/{body['error']['runId']}")
    assert run["data"]["status"] == "failed" and run["data"]["error"]["code"] == "storage_unavailable"
    assert session(url, agent["id"])["messages"] == []
    status, body = http(url, "POST", path, body={"message": "again"})
    assert status == 200, body
    assert [m["role"] for m in session(url, agent["id"])["messages"]] == ["user", "assistant"]


def test_an_async_turn_that_cannot_be_queued_over_http_is_a_failed_run(url, faults: Faults):
    agent = new_agent(url)
    faults.add("sqs", "SendMessage", REFUSED, when=about(agent["id"]))
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages?async=true"
    status, body = http(url, "POST", path, body={"message": "hello"})
    assert status == 503 and body["error"]["code"] == "queue_unavailable", body
    status, run = http(url, "GET", f"/api/runs/{body['error']['runId']}")
    assert run["data"]["status"] == "failed"


def test_a_lost_transcript_put_response_over_http_is_one_committed_turn(url, faults: Faults):
    agent = new_agent(url)
    faults.add("s3", "PutObject", LOST, when=about(agent["id"]))
    status, body = http(url, "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hello"})
    assert status == 200, body
    assert faults.injected == [("s3", "PutObject", LOST)]
    data = session(url, agent["id"])
    assert data["messageCount"] == 2 and len(data["messages"]) == 2


def test_a_stalled_read_over_http_answers_within_the_budget(url, faults: Faults):
    agent = new_agent(url)
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    rule = faults.add("s3", "GetObject", STALL, seconds=BUDGET_S + 2, when=about(agent["id"]))
    status, body = http(url, "POST", path, body={"message": "hello"})
    assert status == 504 and body["error"]["code"] == "turn_timeout", body
    assert rule.finished.wait(15)
    faults.clear()
    status, run = http(url, "GET", f"/api/runs/{body['error']['runId']}")
    assert run["data"]["status"] == "failed" and session(url, agent["id"])["messages"] == []
    status, body = http(url, "POST", path, body={"message": "again"})
    assert status == 200, body


def test_the_smoke_test_reports_a_sync_turn_timeout_clearly_and_cleans_up(url, faults: Faults):
    tenant = tenant_key("smoke-slow")  # only this user's transcript reads stall
    rule = faults.add("s3", "GetObject", STALL, seconds=BUDGET_S + 2, when=lambda params: tenant in json.dumps(params))
    out = io.StringIO()
    assert smoke_main(["--url", url, "--token", "dev-smoke-slow"], out=out) == 1
    lines = out.getvalue().splitlines()
    failed = next(line for line in lines if 'chat 1: "hello"' in line)
    assert failed.startswith("  FAIL") and "got 504 turn_timeout" in failed
    assert any(line.strip().startswith("hint: the sync turn ran past its budget") for line in lines)
    assert lines[-2].startswith("FAIL  at step 'chat 1: \"hello\"'") and '"code": "turn_timeout"' in lines[-1]
    assert rule.finished.wait(15)
    assert next(line for line in lines if "clean up: delete agent" in line).startswith("  ok")
    assert http(url, "GET", "/api/agents", user="smoke-slow")[1]["data"]["items"] == []
