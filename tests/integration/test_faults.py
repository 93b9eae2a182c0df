"""Faults at the AWS clients (tests/faults.py) on the turn path: after each, one consistent state.

What "consistent" means for a chat turn (CM4, all-or-nothing): the session's transcript, its
revision and messageCount, the run record, the usage rows and the conversation archive either all
show the turn or none does; the session is free for the next turn; a runId handed to the client
names a run that exists. Each fault runs on the fakes and on moto (whose DynamoDB ignores
transaction idempotency tokens, so both of the commit's recovery paths are exercised).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram.aws import keys
from engram.kernel.ids import tenant_key
from engram.recall.index import conversation_search
from tests.faults import LOST, LOST_FOR_GOOD, REFUSED, STALL, UNREACHABLE, Faults


@pytest.fixture(params=["fake", "moto"])
def any_stack(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield request.getfixturevalue("stack" if request.param == "fake" else "moto_stack")


def _session(stack: Any, agent_id: str) -> dict[str, Any]:
    r = stack.call("GET", f"/api/agents/{agent_id}/sessions/dashboard")
    assert r.status == 200, r.body
    return r.data


def _usage_runs(stack: Any, agent_id: str) -> set[str]:
    r = stack.call("GET", "/api/usage", query={"agentId": agent_id})
    assert r.status == 200, r.body
    return {row["runId"] for row in r.data["items"]}


def _archived(stack: Any, agent_id: str, words: str) -> int:
    found = conversation_search(stack.deps.archive, tenant_key("alice"), agent_id, words)
    return len(found)


def assert_one_turn_committed(stack: Any, agent_id: str, reply: Any) -> None:
    """The turn shows everywhere exactly once."""
    assert reply.status == 200, reply.body
    run_id = reply.data["runId"]
    session = _session(stack, agent_id)
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    assert session["messageCount"] == 2 and session["revision"] == 1
    runs = stack.runs(agent_id)
    assert [(r["id"], r["status"]) for r in runs] == [(run_id, "succeeded")]
    assert _usage_runs(stack, agent_id) == {run_id}


def assert_no_turn_committed(stack: Any, agent_id: str, reply: Any) -> None:
    """Nothing of the failed turn shows; the run it names (if any) is recorded as failed."""
    assert 500 <= reply.status < 600 or reply.status == 409, reply.body
    session = _session(stack, agent_id)
    assert session["messages"] == [] and session.get("messageCount", 0) == 0 and session.get("revision", 0) == 0
    run_id = reply.error.get("runId")
    if run_id is not None:
        run = stack.call("GET", f"/api/runs/{run_id}")
        assert run.status == 200, f"the error names run {run_id}, which does not exist"
        assert run.data["status"] == "failed"
    assert all(r["status"] == "failed" for r in stack.runs(agent_id))
    assert _archived(stack, agent_id, "pelican") == 0


def assert_session_free_and_whole(stack: Any, agent_id: str) -> None:
    """The next turn runs at once (the lease was released) and the transcript holds only it."""
    again = stack.say(agent_id, "second try about the pelican")
    assert again.status == 200, again.body
    session = _session(stack, agent_id)
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    assert session["messages"][0]["content"][0]["text"] == "second try about the pelican"
    assert session["messageCount"] == 2 and session["revision"] == 1


# ---- the end-of-turn commit (one TransactWriteItems) ---------------------------------------------
def test_a_lost_commit_response_is_retried_into_one_committed_turn(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", LOST)
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert faults.injected == [("dynamodb", "TransactWriteItems", LOST)]
    assert_one_turn_committed(any_stack, agent["id"], reply)
    assert _archived(any_stack, agent["id"], "pelican") >= 1


def test_a_commit_lost_for_good_that_did_commit_is_a_committed_turn(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", LOST_FOR_GOOD)
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert_one_turn_committed(any_stack, agent["id"], reply)


def test_a_refused_commit_with_a_refused_rollback_leaves_no_trace(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", REFUSED)  # the commit; the failed run is recorded
    faults.add("s3", "PutObject", REFUSED, skip=1)  # any PUT after the turn's own (a rollback)
    faults.add("s3", "DeleteObject", REFUSED)
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503 and reply.error["code"] == "storage_unavailable", reply.body
    faults.clear()
    assert_no_turn_committed(any_stack, agent["id"], reply)
    assert_session_free_and_whole(any_stack, agent["id"])


def test_when_the_failed_run_cannot_be_recorded_the_lease_is_still_freed_and_no_run_id_is_given(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", REFUSED, times=2)  # the commit and the failure record
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503, reply.body
    assert "runId" not in reply.error
    assert stack_runs_ids(any_stack, agent["id"]) == []
    assert_no_turn_committed(any_stack, agent["id"], reply)
    assert_session_free_and_whole(any_stack, agent["id"])


def stack_runs_ids(stack: Any, agent_id: str) -> list[str]:
    return [r["id"] for r in stack.runs(agent_id)]


def test_an_unreachable_table_at_the_start_of_a_turn_is_a_clean_503(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "UpdateItem", UNREACHABLE)  # the session lease
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503 and reply.error["code"] == "storage_unavailable", reply.body
    assert "amazonaws" not in str(reply.body)
    assert_session_free_and_whole(any_stack, agent["id"])


# ---- the transcript's conditional PUT ------------------------------------------------------------
def test_a_lost_transcript_put_response_is_recognised_as_our_own_write(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("s3", "PutObject", LOST)
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert faults.injected == [("s3", "PutObject", LOST)]
    assert_one_turn_committed(any_stack, agent["id"], reply)


def test_a_refused_transcript_put_fails_the_turn_without_a_trace(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("s3", "PutObject", REFUSED, error="InternalError")
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503, reply.body
    assert_no_turn_committed(any_stack, agent["id"], reply)
    assert_session_free_and_whole(any_stack, agent["id"])


def test_a_transcript_written_by_a_turn_that_never_committed_is_not_read(any_stack, faults: Faults):
    """The rollback is best-effort: readers trust the session row, not the newest object."""
    agent = any_stack.agent()
    assert any_stack.say(agent["id"], "first about the heron").status == 200
    faults.add("dynamodb", "TransactWriteItems", REFUSED)
    faults.add("s3", "PutObject", REFUSED, skip=1)
    failed = any_stack.say(agent["id"], "tell me about the pelican")
    assert failed.status == 503, failed.body
    faults.clear()
    session = _session(any_stack, agent["id"])
    assert [m["content"][0]["text"] for m in session["messages"] if m["role"] == "user"] == ["first about the heron"]
    assert session["messageCount"] == 2
    export = any_stack.call("GET", "/api/me/export")
    exported = [s for a in export.data["agents"] for s in a["sessions"] if a["id"] == agent["id"]]
    assert [len(s["messages"]) for s in exported if s["id"] == "dashboard"] == [2]
    nxt = any_stack.say(agent["id"], "and the stork?")
    assert nxt.status == 200, nxt.body
    texts = [m["content"][0]["text"] for m in _session(any_stack, agent["id"])["messages"] if m["role"] == "user"]
    assert texts == ["first about the heron", "and the stork?"]


# ---- queued turns: the run record and the SQS send -----------------------------------------------
def test_an_async_turn_whose_send_fails_is_not_left_queued(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("sqs", "SendMessage", REFUSED)
    reply = any_stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hi"}, query={"async": "true"}
    )
    assert reply.status == 503 and reply.error["code"] == "queue_unavailable", reply.body
    runs = any_stack.runs(agent["id"])
    assert [(r["status"], r["error"]["code"]) for r in runs] == [("failed", "queue_unavailable")]
    assert reply.error["runId"] == runs[0]["id"]


def test_a_webhook_whose_send_fails_is_not_left_queued(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("sqs", "SendMessage", UNREACHABLE)
    reply = any_stack.webhook(agent["id"], agent["webhookSecret"], {"message": "deploy finished"})
    assert reply.status == 503 and reply.error["code"] == "queue_unavailable", reply.body
    assert [r["status"] for r in any_stack.runs(agent["id"])] == ["failed"]


# ---- what a failure tells the client ---------------------------------------------------------------
def test_an_access_denied_write_fails_the_turn_without_aws_details(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("s3", "PutObject", REFUSED, error="AccessDenied")
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 500 and reply.error["code"] == "internal_error", reply.body
    run = any_stack.call("GET", f"/api/runs/{reply.error['runId']}").data
    for shown in (str(reply.body), str(run["error"])):
        assert "AccessDenied" not in shown and "PutObject" not in shown and "arn:" not in shown
    assert run["error"]["code"] == "internal_error"


# ---- stalls: the turn answers within its budget ------------------------------------------------------
def _budget(stack: Any, seconds: float) -> None:
    stack.deps.settings = stack.deps.settings.model_copy(update={"sync_turn_budget_s": seconds})


@pytest.mark.parametrize("operation", [("s3", "GetObject"), ("dynamodb", "GetItem"), ("dynamodb", "UpdateItem")])
def test_a_stalled_read_fails_the_turn_cleanly_within_its_budget(stack, faults: Faults, operation):
    agent = stack.agent()
    _budget(stack, 1.0)
    rule = faults.add(*operation, STALL, seconds=2.5)
    reply = stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 504 and reply.error["code"] == "turn_timeout", reply.body
    assert rule.finished.wait(10)  # the abandoned call ends on its own
    faults.clear()
    _budget(stack, 25.0)
    # A lease the stalled call took after all is freed as it lands (engine.turn, `if_it_lands`):
    # just after the call, not before it, so wait for that rather than race it (the tests'
    # sessions do not wait for a busy lease).
    _wait_lease_free(stack, agent["id"])
    assert_no_turn_committed(stack, agent["id"], reply)
    assert_session_free_and_whole(stack, agent["id"])


def _wait_lease_free(stack: Any, agent_id: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = stack.deps.table.get(keys.agent_pk(tenant_key("alice"), agent_id), keys.session_sk("dashboard"))
        if not (row or {}).get("leaseOwner"):
            return
        time.sleep(0.05)
    raise AssertionError("the lease the stalled call took was not freed")


def test_a_stalled_commit_is_given_up_and_its_late_arrival_changes_nothing(stack, faults: Faults):
    agent = stack.agent()
    _budget(stack, 1.0)
    rule = faults.add("dynamodb", "TransactWriteItems", STALL, seconds=2.5)  # the commit; the failure record passes
    reply = stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 504 and reply.error["code"] == "turn_timeout", reply.body
    assert rule.finished.wait(10)  # the stalled commit arrives after the failure was recorded...
    faults.clear()
    _budget(stack, 25.0)
    assert_no_turn_committed(stack, agent["id"], reply)  # ...and its conditions refuse it
    assert_session_free_and_whole(stack, agent["id"])


# ---- the session lease after an outage (issue 22, item 8) ------------------------------------------
@pytest.fixture
def lease_clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The leases' clock: `lease_clock[0]` seconds ahead of the real one (never waited on)."""
    from engram.conversations import repository

    ahead = [0]
    monkeypatch.setattr(repository, "_now", lambda: int(time.time()) + ahead[0])
    return ahead


def _is_release(params: dict[str, Any]) -> bool:
    return str(params.get("UpdateExpression", "")).startswith("REMOVE leaseOwner")


def test_a_session_whose_release_an_outage_refused_is_free_again_within_one_lease(any_stack, faults: Faults, lease_clock):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", REFUSED, times=2)  # the commit, then the failed run's record
    faults.add("dynamodb", "UpdateItem", REFUSED, times=10, when=_is_release)  # every release of the lease
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503, reply.body
    faults.clear()  # storage is back
    busy = any_stack.say(agent["id"], "too soon")
    assert busy.status == 409 and busy.error["code"] == "session_busy", busy.body  # the lease was never released...
    lease_clock[0] = int(any_stack.deps.settings.session_lease_s) + 2  # ...but it lasts one lease, not a turn's budget
    assert_no_turn_committed(any_stack, agent["id"], reply)
    assert_session_free_and_whole(any_stack, agent["id"])


def test_a_release_refused_once_is_tried_again_so_the_session_is_free_at_once(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", REFUSED, times=2)
    faults.add("dynamodb", "UpdateItem", REFUSED, when=_is_release)  # the first release only
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503, reply.body
    assert ("dynamodb", "UpdateItem", REFUSED) in faults.injected
    faults.clear()
    assert_no_turn_committed(any_stack, agent["id"], reply)
    assert_session_free_and_whole(any_stack, agent["id"])


# ---- a sync turn's budget counts from the request's arrival (issue 22, item 7) ---------------------
@pytest.fixture
def arrived(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """API Gateway's clock for the next requests: each arrived `arrived[0]` seconds before the
    function ran it (its `requestContext.timeEpoch`), as when requests queue for a busy function."""
    import local.apigw as apigw

    earlier = [0.0]
    build = apigw.build_http_event

    def built(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return build(*args, now=datetime.now(UTC) - timedelta(seconds=earlier[0]), **kwargs)

    monkeypatch.setattr(apigw, "build_http_event", built)
    return earlier


def test_a_sync_turn_that_waited_before_it_ran_still_answers_within_its_budget_of_arrival(stack, faults: Faults, arrived):
    agent = stack.agent()
    arrived[0] = stack.deps.settings.sync_turn_budget_s - 1.0  # one second of the budget is left
    rule = faults.add("s3", "GetObject", STALL, seconds=2.5)  # a slow transcript read
    reply = stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 504 and reply.error["code"] == "turn_timeout", reply.body  # not 200 after 27 s
    assert rule.finished.wait(10)  # the abandoned read ends; nothing commits after the 504
    faults.clear()
    arrived[0] = 0.0
    _wait_lease_free(stack, agent["id"])
    assert_no_turn_committed(stack, agent["id"], reply)
    assert_session_free_and_whole(stack, agent["id"])


def test_a_sync_turn_that_arrived_past_its_budget_touches_nothing(stack, faults: Faults, arrived):
    agent = stack.agent()
    arrived[0] = stack.deps.settings.sync_turn_budget_s + 5.0  # API Gateway has answered the client already
    faults.calls.clear()
    reply = stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 504 and reply.error["code"] == "turn_timeout", reply.body
    assert not {("dynamodb", "UpdateItem"), ("dynamodb", "TransactWriteItems"), ("s3", "PutObject")} & set(faults.calls)
    arrived[0] = 0.0
    assert_no_turn_committed(stack, agent["id"], reply)
    assert_session_free_and_whole(stack, agent["id"])
