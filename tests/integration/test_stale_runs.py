"""No run stays queued or running past its budget plus a grace (issue 22, item 5): the sweeper (the
heartbeat function, on the SweepStaleRuns rule) marks such a run failed with `stale`, whatever kept
it there, and leaves alone every run that finished or moved on. Its clock is faked, never waited on."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engram.runs import repository
from tests.faults import REFUSED, Faults


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The runs' clock (claims, stale times): `clock[0]` seconds ahead of the real one."""
    ahead = [0]
    monkeypatch.setattr(repository, "_now", lambda: int(time.time()) + ahead[0])
    return ahead


def sweep(stack: Any) -> dict[str, Any]:
    return stack.functions["HeartbeatFunction"].invoke({"source": "engram.sweep"})


def stale_after(stack: Any) -> int:
    settings = stack.deps.settings
    return int(2 * settings.run_budget_s + 60 + settings.run_stale_grace_s)


def test_a_run_whose_failure_could_not_be_recorded_is_swept_as_stale(stack, faults: Faults, clock):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go"})
    assert r.status == 202, r.body
    faults.add("dynamodb", "TransactWriteItems", REFUSED, times=2)  # the commit, then the failed run's record
    stack.drain_runs()
    faults.clear()
    run_id = r.data["runId"]
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "running"  # stuck: nothing will end it

    assert sweep(stack) == {"swept": 0}  # within its budget and grace: left alone
    clock[0] = stale_after(stack) - 5
    assert sweep(stack) == {"swept": 0}
    clock[0] = stale_after(stack) + 5
    assert sweep(stack) == {"swept": 1}
    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "failed" and run["error"]["code"] == "stale", run
    assert sweep(stack) == {"swept": 0}  # once


def test_a_queued_run_whose_job_never_arrives_is_swept_and_finished_runs_never_are(stack, clock):
    agent = stack.agent()
    done = stack.run_now(agent["id"], prompt="go")
    assert done["status"] == "succeeded"
    lost = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go"})
    assert lost.status == 202
    stack.sqs.purge_queue(QueueUrl=stack.resources.queue_url("RunQueue"))  # a job parked in a DLQ, say
    chat = stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hi"}, query={"async": "true"}
    )
    assert chat.status == 202
    settings = stack.deps.settings
    clock[0] = int(settings.async_turn_budget_s + settings.run_stale_grace_s) + 5  # past a chat turn's stale time only
    assert sweep(stack) == {"swept": 1}
    assert stack.call("GET", f"/api/runs/{chat.data['runId']}").data["error"]["code"] == "stale"
    clock[0] = stale_after(stack) + 5
    assert sweep(stack) == {"swept": 1}
    statuses = {r["id"]: (r["status"], (r.get("error") or {}).get("code")) for r in stack.runs(agent["id"])}
    assert statuses == {
        done["id"]: ("succeeded", None),
        lost.data["runId"]: ("failed", "stale"),
        chat.data["runId"]: ("failed", "stale"),
    }
    stack.drain_turns()  # the swept chat turn's job arrives after all: it is not run
    assert stack.call("GET", f"/api/runs/{chat.data['runId']}").data["status"] == "failed"


def test_a_run_claimed_after_the_sweeper_read_it_is_left_to_its_worker(stack, clock):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go"})
    clock[0] = stale_after(stack) + 5
    seen = stack.deps.runs.stale()
    assert [run_id for _, run_id, _ in seen] == [r.data["runId"]]
    tenant = seen[0][0]
    assert stack.deps.runs.start(tenant, r.data["runId"], claim_s=60) is not None  # a worker claims it meanwhile
    assert stack.deps.runs.fail_stale(tenant, r.data["runId"], seen[0][2]) is False
    assert stack.call("GET", f"/api/runs/{r.data['runId']}").data["status"] == "running"
