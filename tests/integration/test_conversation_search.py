"""conversation_search against moto: archiving in the turn's transaction, recall across sessions and
past the history cap, tenant and agent isolation, deletion, and the tool through the offline model."""

from __future__ import annotations

import pytest

from engram.conversations.models import Session
from engram.kernel.errors import ProviderError
from engram.kernel.ids import tenant_key
from engram.kernel.model import now_iso
from engram.recall import index as recall
from engram.recall.archive import ArchiveRepository
from engram.recall.index import conversation_search
from engram.runs.models import Run


@pytest.fixture(autouse=True)
def cold_cache():
    recall.clear_cache()
    yield
    recall.clear_cache()


def _archive(stack) -> ArchiveRepository:
    return stack.deps.archive


def _search(stack, user: str, agent_id: str, query: str, **kw):
    return conversation_search(stack.deps.archive, tenant_key(user), agent_id, query, **kw)


def test_a_turn_archives_its_messages_with_session_and_time(stack):
    agent = stack.agent()
    reply = stack.say(agent["id"], "I keep bees on the roof")
    assert reply.status == 200
    items = _archive(stack).session_items(tenant_key("alice"), agent["id"], "dashboard")
    assert [i["role"] for i in items] == ["user", "assistant"]
    assert items[0]["text"] == "I keep bees on the roof" and "bees on the roof" in items[1]["text"]
    run = stack.call("GET", f"/api/runs/{reply.data['runId']}").data
    for item in items:
        assert item["sessionId"] == "dashboard" and item["runId"] == reply.data["runId"]
        assert item["createdAt"] == run["updatedAt"]
    hits = _search(stack, "alice", agent["id"], "bees roof")
    assert hits[0]["sessionId"] == "dashboard" and hits[0]["createdAt"] == run["updatedAt"]
    assert {h["role"] for h in hits} == {"user", "assistant"}
    # the agent's replies are said by the agent, by name; the user's name is not known
    assert [h.get("speaker") for h in sorted(hits, key=lambda h: h["role"])] == ["Ada", None]


def test_a_query_naming_the_agent_prefers_what_the_agent_said(stack):
    agent = stack.agent(name="Orla")
    stack.say(agent["id"], "the greenhouse needs new glass")
    hits = _search(stack, "alice", agent["id"], "what did Orla say about the greenhouse")
    assert [h["role"] for h in hits] == ["assistant", "user"]
    assert hits[0]["speaker"] == "Orla" and "greenhouse" in hits[0]["text"]


def test_a_message_trimmed_by_the_history_cap_is_still_found(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 4})
    agent = stack.agent()
    stack.say(agent["id"], "my first car was a turquoise Fiat Panda")
    # Past the cap the history is cut to half of it (engine.trim.trim_in_steps): two cuts later,
    # neither the message nor the offline model's echoes of it are left.
    for i in range(5):
        assert stack.say(agent["id"], f"filler message {i}").status == 200
    transcript = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert len(transcript) == 4 and "Panda" not in str(transcript)  # trimmed away...
    hits = _search(stack, "alice", agent["id"], "what was my first car?", limit=3)
    said = [h for h in hits if h["role"] == "user"]
    assert said and said[0]["text"] == "my first car was a turquoise Fiat Panda"  # ...but archived
    assert all("Panda" in h["text"] for h in hits[:2])  # (the offline model echoed it in its reply)


def test_search_spans_the_sessions_of_one_agent(stack):
    agent = stack.agent()
    base = f"/api/agents/{agent['id']}/sessions"
    assert stack.call("POST", base, body={"id": "travel"}).status == 201
    stack.say(agent["id"], "the Lisbon trip is in May", session="travel")
    stack.say(agent["id"], "remind me to pack sunscreen for Lisbon")
    hits = _search(stack, "alice", agent["id"], "Lisbon", limit=10)
    assert {h["sessionId"] for h in hits} == {"travel", "dashboard"}
    only = _search(stack, "alice", agent["id"], "Lisbon", session_id="travel")
    assert only and {h["sessionId"] for h in only} == {"travel"}


def test_a_search_right_after_a_turn_sees_that_turn(stack):
    agent = stack.agent()
    stack.say(agent["id"], "warming up the cache")
    assert _search(stack, "alice", agent["id"], "cache")  # the cache entry now exists
    assert _search(stack, "alice", agent["id"], "kumquat") == []
    stack.say(agent["id"], "I just planted a kumquat tree")
    hits = _search(stack, "alice", agent["id"], "kumquat")
    assert hits and hits[0]["text"] == "I just planted a kumquat tree"


def test_other_agents_and_other_users_never_appear(stack):
    mine = stack.agent(user="alice")
    my_other = stack.agent(user="alice")
    theirs = stack.agent(user="bob")
    stack.say(mine["id"], "the password hint is periwinkle", user="alice")
    stack.say(my_other["id"], "periwinkle is also said to my other agent", user="alice")
    stack.say(theirs["id"], "bob says periwinkle too", user="bob")

    def sources(user, agent_id):
        hits = _search(stack, user, agent_id, "periwinkle", limit=20)
        return {(h["runId"], h["text"]) for h in hits}

    mine_hits = sources("alice", mine["id"])
    assert mine_hits and all("other agent" not in t and "bob" not in t for _, t in mine_hits)
    assert all("other agent" in t for _, t in sources("alice", my_other["id"]))
    assert all("bob" in t for _, t in sources("bob", theirs["id"]))
    # a principal naming someone else's agent reaches an empty partition, not their archive
    assert _search(stack, "bob", mine["id"], "periwinkle") == []
    assert _search(stack, "alice", theirs["id"], "periwinkle") == []
    # and through the tool: bob's agent cannot recall alice's words
    r = stack.say(theirs["id"], "did we talk about periwinkle?", user="bob")
    results = r.data["toolCalls"][0]["result"]
    assert results and all("bob says" in hit["text"] for hit in results)


def test_deleting_a_session_deletes_its_archive_but_not_the_others(stack):
    agent = stack.agent()
    t = tenant_key("alice")
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "scratch"})
    stack.say(agent["id"], "the vault code is tangerine", session="scratch")
    stack.say(agent["id"], "tangerine is my favourite fruit")
    assert {h["sessionId"] for h in _search(stack, "alice", agent["id"], "tangerine", limit=10)} == {"scratch", "dashboard"}
    assert stack.call("DELETE", f"/api/agents/{agent['id']}/sessions/scratch").status == 200  # deletes its archive
    assert _archive(stack).session_items(t, agent["id"], "scratch") == []
    assert {h["sessionId"] for h in _search(stack, "alice", agent["id"], "tangerine", limit=10)} == {"dashboard"}


def test_a_warm_cache_elsewhere_drops_a_deleted_session(stack):
    agent = stack.agent()
    t = tenant_key("alice")
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "old"})
    stack.say(agent["id"], "we discussed the aquarium", session="old")
    stack.say(agent["id"], "the aquarium has new fish")
    assert len({h["sessionId"] for h in _search(stack, "alice", agent["id"], "aquarium")}) == 2  # warm
    # another container deletes it: this container's cache only learns from the tombstone
    _archive(stack).delete_session(t, agent["id"], "old")
    assert {h["sessionId"] for h in _search(stack, "alice", agent["id"], "aquarium")} == {"dashboard"}


def test_deleting_the_agent_removes_its_archive(stack):
    agent = stack.agent()
    stack.say(agent["id"], "remember the lighthouse")
    t = tenant_key("alice")
    assert _archive(stack).load_since(t, agent["id"], None)
    assert stack.call("DELETE", f"/api/agents/{agent['id']}").status == 200
    assert _archive(stack).load_since(t, agent["id"], None) == []


def test_a_failed_turn_archives_nothing(stack):
    agent = stack.agent()

    class Broken:
        name = "broken"

        def complete(self, **_kw):
            raise ProviderError("upstream down", code="model_error")

    stack.deps.provider_override = Broken()
    assert stack.say(agent["id"], "this will fail: marigold").status >= 500
    stack.deps.provider_override = None
    assert _archive(stack).session_items(tenant_key("alice"), agent["id"], "dashboard") == []
    assert _search(stack, "alice", agent["id"], "marigold") == []


def test_finish_turn_puts_many_archive_items_past_the_transaction_limit(stack):
    agent = stack.agent()
    t = tenant_key("alice")
    sessions, runs, archive = stack.deps.sessions, stack.deps.runs, _archive(stack)
    sessions.acquire_lease(t, agent["id"], "dashboard", "run_many", 30)
    now = now_iso()
    run = Run(
        id="run_many",
        created_at=now,
        updated_at=now,
        agent_id=agent["id"],
        kind="chat",
        status="running",
        prompt="x",
        session_id="dashboard",
        model="offline",
    )
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": f"message {i} about otters"}]}
        for i in range(120)
    ]
    items = archive.items_for_turn(t, agent["id"], "dashboard", "run_many", messages, now)
    runs.finish_turn(
        t, run=run.model_copy(update={"status": "succeeded"}), usage_rows=[], session_changes={"revision": 1}, extra_items=items
    )
    assert len(archive.session_items(t, agent["id"], "dashboard")) == 120
    assert sessions.get(t, agent["id"], "dashboard").get("leaseOwner") is None


def test_the_tool_through_the_offline_model(stack):
    agent = stack.agent()
    stack.say(agent["id"], "my cat is called Marzipan")
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "later"})
    r = stack.say(agent["id"], "did we talk about Marzipan?", session="later")
    assert r.status == 200
    call = r.data["toolCalls"][0]
    assert call["name"] == "conversation_search" and call["input"] == {"query": "Marzipan"}
    assert call["result"][0]["session"] == "dashboard" and call["result"][0]["text"] == "my cat is called Marzipan"
    assert call["result"][0]["time"] and call["result"][0]["role"] == "user"
    assert "Marzipan" in r.data["reply"]
    none = stack.say(agent["id"], "search our conversations for zeppelins", session="later")
    assert none.data["toolCalls"][0]["result"].startswith("No matches")


def test_turns_queued_asynchronously_are_archived_too(stack):
    agent = stack.agent()
    r = stack.call(
        "POST",
        f"/api/agents/{agent['id']}/sessions/dashboard/messages",
        body={"message": "queued note about walruses"},
        query={"async": "true"},
    )
    assert r.status == 202
    stack.drain_turns()
    hits = _search(stack, "alice", agent["id"], "walruses")
    assert hits and hits[0]["runId"] == r.data["runId"]


def test_sessions_created_later_keep_their_own_archive(stack):
    # a session id that is a prefix of another must not share its archive (ARCH#<id># with the separator)
    agent = stack.agent()
    t = tenant_key("alice")
    for sid in ("s1", "s10"):
        stack.deps.sessions.create(
            t, Session(id=sid, agent_id=agent["id"], created_at=now_iso(), updated_at=now_iso()), limit=100
        )
        stack.say(agent["id"], f"note in {sid} about pelicans", session=sid)
    stack.deps.archive.delete_session(t, agent["id"], "s1")
    assert {h["sessionId"] for h in _search(stack, "alice", agent["id"], "pelicans")} == {"s10"}


def test_a_person_searches_the_archive_through_the_api_past_the_cap(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 4})
    agent = stack.agent()
    stack.say(agent["id"], "my first car was a turquoise Fiat Panda")
    for i in range(5):
        assert stack.say(agent["id"], f"filler message {i}").status == 200
    path = f"/api/agents/{agent['id']}/archive/search"
    first = stack.call("GET", path, query={"q": "turquoise Panda", "limit": "1"})
    assert first.status == 200, first.body
    [hit] = first.data["items"]
    assert "Panda" in hit["text"] and hit["sessionId"] == "dashboard" and hit["role"] in ("user", "assistant")
    assert first.data["nextToken"]
    second = stack.call("GET", path, query={"q": "turquoise Panda", "limit": "1", "nextToken": first.data["nextToken"]})
    assert second.status == 200 and second.data["items"] and second.data["items"][0] != hit
    said = {h["text"] for h in first.data["items"] + second.data["items"] if h["role"] == "user"}
    assert said == {"my first car was a turquoise Fiat Panda"}
    other = stack.call("GET", path, query={"q": "filler", "nextToken": first.data["nextToken"]})
    assert other.status == 400 and other.error["field"] == "nextToken"
    missing = stack.call("GET", path)
    assert missing.status == 400 and missing.error["field"] == "q"
    assert stack.call("GET", path, query={"q": "Panda"}, user="bob").status == 404
