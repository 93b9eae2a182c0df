"""Issue 39, items 1-3: every outcome known before it is reported, and retries that are safe.

A commit whose answer is lost is read back before the turn answers: committed, the turn's answer;
not committed, a clean failure; unreadable, a 503 `outcome_unknown` naming the run
("outcome unknown, see GET /api/runs/{runId}"), never "nothing was changed". The sync message
route takes an `Idempotency-Key` header (or the body's `clientTurnId`): a retry gets the first
outcome and runs nothing. Faults come from the injector (tests/faults.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults import LOST, LOST_FOR_GOOD, REFUSED, UNREACHABLE, Faults
from tests.integration.test_faults import _session, assert_one_turn_committed


@pytest.fixture(params=["fake", "moto"])
def any_stack(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("stack" if request.param == "fake" else "moto_stack")


def _run_read(params: dict[str, Any]) -> bool:
    return "RUN#" in str(params.get("Key", {}).get("SK", ""))


def _say(stack: Any, agent_id: str, message: str, key: str | None = None, **body: Any) -> Any:
    headers = {"Idempotency-Key": key} if key else None
    return stack.call(
        "POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", body={"message": message, **body}, headers=headers
    )


def test_a_landed_commit_whose_answer_and_read_back_are_lost_is_a_503_naming_the_run(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", LOST_FOR_GOOD)  # the commit lands; its answer never comes
    faults.add("dynamodb", "GetItem", UNREACHABLE, times=5, when=_run_read)  # and the read-back fails
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503 and reply.error["code"] == "outcome_unknown", reply.body
    run_id = reply.error["runId"]
    assert reply.error["message"] == f"outcome unknown, see GET /api/runs/{run_id}"
    assert "nothing was changed" not in reply.error["message"]
    faults.clear()
    run = any_stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "succeeded"  # the truth: it did commit
    assert _session(any_stack, agent["id"])["revision"] == 1


def test_a_commit_that_never_arrived_is_read_back_and_reported_as_a_clean_failure(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", UNREACHABLE)  # not applied, no answer
    reply = any_stack.say(agent["id"], "tell me about the pelican")
    assert reply.status == 503 and reply.error["code"] == "storage_unavailable", reply.body
    run = any_stack.call("GET", f"/api/runs/{reply.error['runId']}").data
    assert run["status"] == "failed"
    assert _session(any_stack, agent["id"])["revision"] == 0


def test_a_retry_with_the_same_idempotency_key_gets_the_first_answer_and_runs_nothing(any_stack, faults: Faults):
    """The issue's case: the commit landed, its answer and the read-back were lost, the client
    was told 503; its retry used to run the turn twice."""
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", LOST_FOR_GOOD, skip=1)  # the commit (the claim of the key passes)
    faults.add("dynamodb", "GetItem", UNREACHABLE, times=5, when=_run_read)
    first = _say(any_stack, agent["id"], "tell me about the pelican", key="turn-0001")
    assert first.status == 503 and first.error["code"] == "outcome_unknown", first.body
    faults.clear()
    retry = _say(any_stack, agent["id"], "tell me about the pelican", key="turn-0001")
    assert retry.status == 200 and retry.data["runId"] == first.error["runId"], retry.body
    assert_one_turn_committed(any_stack, agent["id"], retry)
    again = _say(any_stack, agent["id"], "tell me about the pelican", clientTurnId="turn-0001")  # the body's id alike
    assert again.status == 200 and again.data == retry.data
    assert len(any_stack.runs(agent["id"])) == 1


def test_a_claim_whose_answer_is_lost_is_asked_again_and_the_turn_runs_once(any_stack, faults: Faults):
    agent = any_stack.agent()
    faults.add("dynamodb", "TransactWriteItems", LOST_FOR_GOOD)  # the claim of the key lands, its answer is lost
    reply = _say(any_stack, agent["id"], "tell me about the pelican", key="turn-0004")
    assert_one_turn_committed(any_stack, agent["id"], reply)
    assert _say(any_stack, agent["id"], "tell me about the pelican", key="turn-0004").data == reply.data


def test_a_retry_of_a_failed_turn_gets_its_failure_and_a_turn_that_never_ran_runs_on_retry(stack, faults: Faults):
    agent = stack.agent()
    faults.add("dynamodb", "TransactWriteItems", REFUSED, skip=1)  # the commit is refused; the failure is recorded
    failed = _say(stack, agent["id"], "tell me about the pelican", key="turn-0002")
    assert failed.status == 503 and failed.error["runId"], failed.body
    faults.clear()
    replay = _say(stack, agent["id"], "tell me about the pelican", key="turn-0002")
    assert (
        replay.status == 503 and replay.error["runId"] == failed.error["runId"] and replay.error["code"] == failed.error["code"]
    )
    assert [r["status"] for r in stack.runs(agent["id"])] == ["failed"]
    # The lease update at the start is refused: the turn never started, so its key runs on retry.
    faults.add("dynamodb", "UpdateItem", REFUSED)
    unstarted = _say(stack, agent["id"], "and the heron?", key="turn-0003")
    assert unstarted.status == 503, unstarted.body
    faults.clear()
    ran = _say(stack, agent["id"], "and the heron?", key="turn-0003")
    assert ran.status == 200, ran.body
    assert sorted(r["status"] for r in stack.runs(agent["id"])) == ["failed", "succeeded"]


@pytest.mark.parametrize(
    "headers, body, field",
    [
        ({"Idempotency-Key": "../etc"}, {}, "Idempotency-Key"),
        ({"Idempotency-Key": "turn-a"}, {"clientTurnId": "turn-b"}, "clientTurnId"),
        ({}, {"clientTurnId": 5}, "clientTurnId"),
    ],
)
def test_a_bad_idempotency_key_is_a_400_naming_it(stack, headers, body, field):
    agent = stack.agent()
    r = stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hi", **body}, headers=headers
    )
    assert r.status == 400 and r.error["field"] == field, r.body
    assert stack.runs(agent["id"]) == []


# ---- API keys: create and revoke under lost answers ------------------------------------------------
def _keys(stack: Any) -> list[dict[str, Any]]:
    return stack.call("GET", "/api/me/api-keys").data["items"]


@pytest.mark.parametrize("fault", [LOST_FOR_GOOD, LOST])
def test_a_created_key_whose_answer_is_lost_is_read_back_and_answered(any_stack, faults: Faults, fault):
    """A lost answer gave a 500 and an orphan key that counted against the quota."""
    earlier = any_stack.call("POST", "/api/me/api-keys", body={"name": "phone"}).data  # the quota's counter exists
    faults.add("dynamodb", "TransactWriteItems", fault)
    r = any_stack.call("POST", "/api/me/api-keys", body={"name": "laptop"})
    assert r.status == 201, r.body
    assert sorted(k["id"] for k in _keys(any_stack)) == sorted([earlier["id"], r.data["id"]])
    assert any_stack.call("GET", "/api/agents", user=None, headers={"authorization": f"Bearer {r.data['key']}"}).status == 200


def test_a_retried_create_with_the_same_idempotency_key_makes_one_key(stack, faults: Faults):
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_api_keys": 2})
    earlier = stack.call("POST", "/api/me/api-keys", body={"name": "phone"}).data  # the quota's counter exists
    faults.add("dynamodb", "TransactWriteItems", LOST_FOR_GOOD)
    faults.add("dynamodb", "GetItem", UNREACHABLE, times=3)  # nor can it be read back: the outcome is unknown
    first = stack.call("POST", "/api/me/api-keys", body={"name": "laptop"}, headers={"Idempotency-Key": "key-req-1"})
    assert first.status == 503 and first.error["code"] == "outcome_unknown", first.body
    assert "GET /api/me/api-keys" in first.error["message"]
    faults.clear()
    retry = stack.call("POST", "/api/me/api-keys", body={"name": "laptop"}, headers={"Idempotency-Key": "key-req-1"})
    assert retry.status == 201, retry.body  # not quota_exceeded: the first key is this one
    listed = {k["id"]: k for k in _keys(stack)}
    assert (
        sorted(listed) == sorted([earlier["id"], retry.data["id"]]) and listed[retry.data["id"]]["hint"] == retry.data["key"][:8]
    )
    assert stack.call("GET", "/api/agents", user=None, headers={"authorization": f"Bearer {retry.data['key']}"}).status == 200


def test_a_revocation_whose_answer_is_lost_and_its_retry_both_say_deleted(any_stack, faults: Faults):
    created = any_stack.call("POST", "/api/me/api-keys", body={"name": "laptop"}).data
    faults.add("dynamodb", "TransactWriteItems", LOST)  # applied; the SDK's retry meets its own delete
    gone = any_stack.call("DELETE", f"/api/me/api-keys/{created['id']}")
    assert gone.status == 200 and gone.data == {"id": created["id"], "deleted": True}, gone.body
    again = any_stack.call("DELETE", f"/api/me/api-keys/{created['id']}")  # the client's own resend
    assert again.status == 200 and again.data == gone.data
    assert _keys(any_stack) == []
    assert any_stack.call("DELETE", "/api/me/api-keys/key_neverexisted").status == 404
    assert any_stack.call("POST", "/api/me/api-keys", body={"name": "next"}).status == 201  # the quota was released once


# ---- runs never lie: a queued (socket or async) turn that fails is marked failed at once ----------
def test_a_queued_turn_whose_failure_record_an_outage_refused_is_marked_failed_at_once(any_stack, faults: Faults):
    """A socket turn during an outage sent turn.failed but its run stayed queued until the sweeper
    (22.6 minutes): the commit and the failure record were both refused."""
    agent = any_stack.agent()
    r = any_stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hi"}, query={"async": "true"}
    )
    assert r.status == 202, r.body
    faults.add("dynamodb", "TransactWriteItems", REFUSED, times=2)  # the commit, then the failed run's record
    any_stack.drain_turns()
    faults.clear()
    run = any_stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "storage_unavailable", run
    assert _session(any_stack, agent["id"])["revision"] == 0


def test_a_keyed_turn_that_never_started_leaves_no_claim_and_runs_on_retry(any_stack):
    """The session did not exist yet: nothing ran, so the key's claim and its queued run are dropped."""
    agent = any_stack.agent()
    path = f"/api/agents/{agent['id']}/sessions/later/messages"
    first = any_stack.call("POST", path, body={"message": "hello"}, headers={"Idempotency-Key": "turn-0005"})
    assert first.status == 404 and first.error["field"] == "sessionId", first.body
    assert any_stack.runs(agent["id"]) == []  # no queued run left behind
    assert any_stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "later"}).status == 201
    again = any_stack.call("POST", path, body={"message": "hello"}, headers={"Idempotency-Key": "turn-0005"})
    assert again.status == 200, again.body
    assert [r["status"] for r in any_stack.runs(agent["id"])] == ["succeeded"]
