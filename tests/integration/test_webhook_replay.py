"""Signed webhooks cannot be replayed, come from a bounded clock window, and cost the same for
an unknown agent as for a bad signature (so neither can be told apart, not even by timing)."""

from __future__ import annotations

import json
import time

from tests.faults import REFUSED, UNREACHABLE, Faults


def test_a_replayed_signed_request_is_refused_and_queues_nothing(stack):
    agent = stack.agent()
    ts = int(time.time())
    body = {"message": "deploy finished"}
    first = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)
    assert first.status == 202, first.body
    for _ in range(4):
        again = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)
        assert again.status == 409 and again.error["code"] == "duplicate_delivery", again.body
    assert len(stack.runs(agent["id"])) == 1
    # The same message signed anew (another timestamp) is a new delivery.
    assert stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts + 1).status == 202
    assert len(stack.runs(agent["id"])) == 2


def test_timestamps_far_in_the_future_are_refused(stack):
    agent = stack.agent()
    body = {"message": "hi"}
    future = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=int(time.time()) + 120)
    assert future.status == 401 and future.error["code"] == "stale_signature", future.body
    slight = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=int(time.time()) + 10)
    assert slight.status == 202, slight.body  # clocks drift a little
    old = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=int(time.time()) - 301)
    assert old.status == 401 and old.error["code"] == "stale_signature"


def test_an_unknown_agent_and_a_bad_signature_do_the_same_work(stack, faults: Faults):
    agent = stack.agent()
    body = {"message": "hi"}
    faults.calls.clear()
    unknown = stack.webhook("ag_nobody", agent["webhookSecret"], body)
    unknown_calls = list(faults.calls)
    faults.calls.clear()
    bad = stack.webhook(agent["id"], "not-the-secret", body)
    bad_calls = list(faults.calls)
    assert unknown.status == bad.status == 401 and unknown.body == bad.body
    assert unknown_calls == bad_calls == [("dynamodb", "Query")]
    assert json.dumps(unknown.body) == json.dumps(bad.body)


# ---- only a queued delivery counts as delivered (issue 22, item 6) ---------------------------------
def test_a_delivery_refused_because_the_queue_is_down_can_be_retried_and_runs(stack, faults: Faults):
    agent = stack.agent()
    ts = int(time.time())
    body = {"message": "deploy finished"}
    faults.add("sqs", "SendMessage", REFUSED)
    refused = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)
    assert refused.status == 503 and refused.error["code"] == "queue_unavailable", refused.body
    faults.clear()
    retry = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)  # the sender's retry, same signature
    assert retry.status == 202, retry.body
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{retry.data['runId']}").data
    assert run["status"] == "succeeded", run
    again = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)  # now it was delivered
    assert again.status == 409 and again.error["code"] == "duplicate_delivery", again.body


def test_the_mark_of_a_refused_delivery_is_released_even_when_the_first_release_fails(stack, faults: Faults):
    agent = stack.agent()
    ts = int(time.time())
    body = {"message": "deploy finished"}
    faults.add("sqs", "SendMessage", UNREACHABLE)
    faults.add("dynamodb", "DeleteItem", REFUSED)  # the first release of the mark
    assert stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts).status == 503
    assert ("dynamodb", "DeleteItem", REFUSED) in faults.injected
    faults.clear()
    assert stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts).status == 202


def test_a_refused_body_or_a_full_session_quota_is_not_a_delivery(stack):
    agent = stack.agent()
    ts = int(time.time())
    for _ in range(2):  # the same signed request twice: the same answer, never duplicate_delivery
        bad = stack.webhook(agent["id"], agent["webhookSecret"], {"message": ""}, timestamp=ts)
        assert bad.status == 400 and bad.error["code"] == "validation_error", bad.body
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_sessions_per_agent": 1})
    body = {"message": "hi", "session_id": "new-one"}
    for _ in range(2):
        full = stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts)
        assert full.status == 409 and full.error["code"] == "quota_exceeded", full.body
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_sessions_per_agent": 10})
    assert stack.webhook(agent["id"], agent["webhookSecret"], body, timestamp=ts).status == 202


def test_an_overlong_timestamp_is_a_400_before_the_signature_is_checked(stack):
    agent = stack.agent()
    for stamp in ("9" * 309, "1" * 400, "١٧٠٠٠٠٠٠٠٠"):  # 309+ digits; Arabic-Indic digits
        r = stack.call(
            "POST",
            f"/api/agents/{agent['id']}/webhook",
            user=None,
            raw=json.dumps({"message": "hi"}),
            headers={"x-engram-timestamp": stamp, "x-engram-signature": "sha256=" + "0" * 64},
        )
        assert r.status == 400 and r.error["code"] == "invalid_timestamp" and r.error["field"] == "X-Engram-Timestamp", r.body
