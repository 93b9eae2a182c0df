"""Fair queues (ST7): a per-user cap on queued and running turns, over the socket (an error frame
naming it) and over HTTP (429 too_many_turns); a resend at the cap still learns its run; the
room comes back as turns end; other users are not affected."""

from __future__ import annotations

from tests.integration.test_stream_api import Socket


def test_a_user_has_at_most_the_cap_of_turns_queued_or_running(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"max_active_turns": 3})
    agent = stack.agent()
    socket = Socket(stack)
    answers = [socket.turn(agent["id"], f"turn {i}", f"c{i}") for i in range(5)]
    assert [a["type"] for a in answers] == ["turn.queued"] * 3 + ["error"] * 2
    refused = answers[3]
    assert refused["clientTurnId"] == "c3" and refused["error"]["code"] == "too_many_turns"
    assert "MAX_ACTIVE_TURNS" in refused["error"]["message"]
    assert socket.turn(agent["id"], "turn 0", "c0")["runId"] == answers[0]["runId"]  # a resend at the cap
    path = f"/api/agents/{agent['id']}/sessions/dashboard/messages"
    r = stack.call("POST", path, query={"async": "true"}, body={"message": "one more"})
    assert r.status == 429 and r.error["code"] == "too_many_turns"
    bobs = stack.agent(user="bob")
    assert (
        stack.call(
            "POST",
            f"/api/agents/{bobs['id']}/sessions/dashboard/messages",
            user="bob",
            query={"async": "true"},
            body={"message": "mine"},
        ).status
        == 202
    )
    stack.drain_turns()
    assert {r["status"] for r in stack.runs(agent["id"])} == {"succeeded"} and len(stack.runs(agent["id"])) == 3
    again = socket.turn(agent["id"], "now there is room", "c5")
    assert again["type"] == "turn.queued"


def test_a_turn_that_could_not_be_queued_does_not_count(stack, faults):
    from tests.faults import REFUSED

    stack.deps.settings = stack.deps.settings.model_copy(update={"max_active_turns": 1})
    agent = stack.agent()
    socket = Socket(stack)
    faults.add("sqs", "SendMessage", REFUSED)
    lost = socket.turn(agent["id"], "lost", "c1")
    assert lost["error"]["code"] == "queue_unavailable"
    assert socket.turn(agent["id"], "kept", "c2")["type"] == "turn.queued"
