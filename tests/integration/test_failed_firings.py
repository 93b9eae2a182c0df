"""Heartbeat firings that failed after Lambda's async retries: Lambda sends its record of the failed
invocation to FailedFiringQueue (the heartbeat function's on-failure destination), the heartbeat
function consumes it, and the agent's runs show the firing's run as failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from engram.kernel.errors import SessionBusy
from engram.kernel.ids import tenant_key
from local.schedules import failure_record
from local.workers import Workers

DEFAULT = "Check BTC and report."
QUEUE = "FailedFiringQueue"


def _firing(agent_id: str, when: str, user: str = "alice") -> dict:
    """The schedule's Input as Scheduler delivered it (what the failed invocation got)."""
    return {
        "source": "engram.schedule",
        "tenant": tenant_key(user),
        "agentId": agent_id,
        "scheduledTime": when,
        "executionId": "e1",
        "attempt": "1",
    }


def _deliver(stack, record: dict) -> None:
    """Lambda sends the record to the destination queue; the heartbeat function's event source takes it."""
    stack.sqs.send_message(QueueUrl=stack.resources.queue_url(QUEUE), MessageBody=json.dumps(record))
    assert Workers(stack.functions, stack.resources, retry_delay=0).drain(QUEUE, timeout=30) == 1


def _record(payload: dict, error=("RuntimeError", "boom at arn:aws:dynamodb:us-east-1:123456789012:table/x"), **kw) -> dict:
    return failure_record(
        payload,
        error,
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:engram-HeartbeatFunction",
        request_id="req-1",
        when=datetime.now(UTC),
        attempts=kw.pop("attempts", 3),
    )


def _busy_firing(stack, agent_id: str, when: str) -> SessionBusy:
    """A firing of an Active Memory agent whose shared session stays busy: it raises (so Lambda
    retries it, then gives up) and leaves its run queued."""
    stack.deps.settings = stack.deps.settings.model_copy(update={"run_session_wait_s": 0})
    stack.deps.sessions.acquire_lease(tenant_key("alice"), agent_id, "dashboard", "someone-else", 300)
    with pytest.raises(SessionBusy) as raised:
        stack.fire(agent_id, when)
    return raised.value


def test_a_firing_that_failed_after_its_retries_shows_as_a_failed_run(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT, activeMemory=True)
    when = stack.at(0)
    err = _busy_firing(stack, agent["id"], when)
    (queued,) = stack.runs(agent["id"])
    assert queued["status"] == "queued"

    _deliver(stack, _record(_firing(agent["id"], when), err))
    (run,) = stack.runs(agent["id"])
    assert run["id"] == queued["id"]  # the firing's own run, not another
    assert run["kind"] == "heartbeat" and run["trigger"] == "schedule" and run["status"] == "failed"
    assert run["error"] == {"code": "firing_failed", "message": err.message}
    assert stack.call("GET", f"/api/runs/{run['id']}").data["error"]["code"] == "firing_failed"

    # Lambda delivers at least once: the same record again changes nothing
    _deliver(stack, _record(_firing(agent["id"], when), err))
    assert stack.runs(agent["id"]) == [run]
    # and a late retry of the firing finds its run finished
    stack.deps.sessions.release_lease(tenant_key("alice"), agent["id"], "dashboard", "someone-else")
    assert stack.fire(agent["id"], when)["status"] == "duplicate"
    assert stack.runs(agent["id"]) == [run]


def test_a_firing_that_failed_before_its_run_was_recorded_gets_one(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    when = stack.at(0)
    # e.g. DynamoDB did not answer: the invocation failed before it wrote the run; the error's own
    # text (ARNs, account ids) stays in the logs
    _deliver(stack, _record(_firing(agent["id"], when)))
    (run,) = stack.runs(agent["id"])
    assert run["status"] == "failed" and run["kind"] == "heartbeat" and run["prompt"].startswith(DEFAULT)
    assert run["error"]["code"] == "firing_failed"
    assert "RuntimeError" in run["error"]["message"] and "req-1" in run["error"]["message"]
    assert "arn:" not in run["error"]["message"]
    # the same scheduled time, fired again, is that run: it is not run a second time
    assert stack.fire(agent["id"], when) == {"runId": run["id"], "scheduledTime": when, "status": "duplicate"}


def test_a_succeeded_run_is_left_alone(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    when = stack.at(0)
    assert stack.fire(agent["id"], when)["status"] == "succeeded"
    (before,) = stack.runs(agent["id"])
    # one delivery of the firing succeeded, another failed for good
    _deliver(stack, _record(_firing(agent["id"], when), ("SessionBusy", "another turn is running on this session")))
    assert stack.runs(agent["id"]) == [before]


def test_a_timeout_and_a_firing_too_old_to_run_say_so(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    first, second = stack.at(0), stack.at(3600)
    _deliver(stack, _record(_firing(agent["id"], first), ("Sandbox.Timedout", "Task timed out after 600.00 seconds")))
    too_old = _record(_firing(agent["id"], second), attempts=0)
    too_old["requestContext"]["condition"] = "EventAgeExceeded"
    del too_old["responseContext"], too_old["responsePayload"]
    _deliver(stack, too_old)
    messages = {r["id"]: r["error"]["message"] for r in stack.runs(agent["id"])}
    assert len(messages) == 2
    assert any("timeout" in m for m in messages.values()) and any("EventAgeExceeded" in m for m in messages.values())


def test_a_failed_firing_of_an_agent_deleted_meanwhile_is_dropped(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    when = stack.at(0)
    assert stack.call("DELETE", f"/api/agents/{agent['id']}").status == 200
    _deliver(stack, _record(_firing(agent["id"], when)))  # consumed, not retried
    assert stack.call("GET", f"/api/agents/{agent['id']}/runs").status == 404
    # nothing was written for it either (a recreated id would show no stray run)
    from engram.runs.execution import firing_run_id

    assert stack.deps.runs.get(tenant_key("alice"), firing_run_id(agent["id"], when)) is None


def test_records_that_are_not_failed_firings_are_dropped_without_a_retry(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt=DEFAULT)
    for payload in ({"tenant": "../x", "agentId": agent["id"], "scheduledTime": stack.at(0)}, {"Records": []}, "text"):
        _deliver(stack, _record(payload))  # type: ignore[arg-type]
    assert stack.runs(agent["id"]) == []
