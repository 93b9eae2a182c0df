"""Signed webhooks cannot be replayed, come from a bounded clock window, and cost the same for
an unknown agent as for a bad signature (so neither can be told apart, not even by timing)."""

from __future__ import annotations

import json
import time

from tests.faults import Faults


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
