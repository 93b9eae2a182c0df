"""Issue 39, item 7: recall knows who spoke. The person's name (PATCH /api/me, or learned from
"my name is ...") is recorded on their archived turns as the agent's name is on its own, and a
query naming them finds their lines through the speaker field."""

from __future__ import annotations

from engram.kernel.ids import tenant_key
from engram.recall.index import conversation_search


def _hits(stack, user: str, agent_id: str, query: str):
    return conversation_search(stack.deps.archive, tenant_key(user), agent_id, query)


def test_a_name_set_with_patch_me_is_the_speaker_of_the_persons_turns(stack):
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": None}
    set_ = stack.call("PATCH", "/api/me", body={"name": "  Caroline "})
    assert set_.status == 200 and set_.data == {"limits": {}, "name": "Caroline"}
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": "Caroline"}
    agent = stack.agent()
    assert stack.say(agent["id"], "I adopted a beagle puppy last week").status == 200
    hits = _hits(stack, "alice", agent["id"], "what did Caroline say about the beagle")
    mine = [h for h in hits if h["role"] == "user"]
    assert mine and mine[0]["speaker"] == "Caroline", hits
    assert all(h["speaker"] == "Ada" for h in hits if h["role"] == "assistant")
    assert stack.call("GET", "/api/me/export").data["profile"] == {"name": "Caroline"}
    assert stack.call("PATCH", "/api/me", body={"name": None}).data == {"limits": {}, "name": None}
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": None}


def test_a_name_given_in_chat_is_learned_once_and_names_that_turn(stack):
    agent = stack.agent(user="bob")
    assert stack.say(agent["id"], "Hi there, my name is Melanie and I paint landscapes.", user="bob").status == 200
    assert stack.call("GET", "/api/me", user="bob").data == {"limits": {}, "name": "Melanie"}
    hits = _hits(stack, "bob", agent["id"], "what does Melanie paint")
    assert [h["speaker"] for h in hits if h["role"] == "user"][:1] == ["Melanie"], hits
    # a name already set is not replaced by a later line
    assert stack.say(agent["id"], "call me Mel from now on", user="bob").status == 200
    assert stack.call("GET", "/api/me", user="bob").data == {"limits": {}, "name": "Melanie"}
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": None}  # alice is someone else


def test_a_name_holding_a_secret_or_too_long_is_a_400(stack):
    r = stack.call("PATCH", "/api/me", body={"name": "password: hunter2x"})
    assert r.status == 400 and r.error["code"] == "secret_detected" and r.error["field"] == "name"
    r = stack.call("PATCH", "/api/me", body={"name": "x" * 101})
    assert r.status in (400, 413) and r.error["field"] == "name"
    assert stack.call("PATCH", "/api/me", body={}).status == 400
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": None}


def test_the_name_goes_with_the_account(stack):
    stack.call("PATCH", "/api/me", body={"name": "Caroline"})
    assert stack.call("DELETE", "/api/me").status == 200
    assert stack.call("GET", "/api/me").data == {"limits": {}, "name": None}
