"""Long-term memory and user facts over REST: upsert by key, ordering, editability, bad input,
secrets, isolation, export and delete-me."""

from __future__ import annotations

import itertools
import time

import pytest


def mem(stack, owner_path, user="alice", **body):
    return stack.call("POST", f"{owner_path}/memories", user=user, body=body)


@pytest.fixture
def agent_path(stack):
    return f"/api/agents/{stack.agent()['id']}"


@pytest.fixture
def ws_path(stack):
    return f"/api/workspaces/{stack.call('POST', '/api/workspaces', body={'name': 'W'}).data['id']}"


@pytest.mark.parametrize("owner", ["agent_path", "ws_path"])
def test_upsert_by_key(stack, owner, request):
    path = request.getfixturevalue(owner)
    created = mem(stack, path, key="tech-stack", value="Python")
    assert created.status == 201 and created.data["source"] == "manual" and created.data["scope"] in ("agent", "workspace")
    again = mem(stack, path, key="tech-stack", value="Python 3.13 on Lambda", importance=40)
    assert again.status == 200 and again.data["id"] == created.data["id"] and again.data["value"] == "Python 3.13 on Lambda"
    assert again.data["createdAt"] == created.data["createdAt"]
    other = mem(stack, path, key="deploy", value="sam deploy")
    assert other.status == 201 and other.data["id"] != created.data["id"]
    rows = stack.call("GET", f"{path}/memories").data["items"]
    assert sorted(r["key"] for r in rows) == ["deploy", "tech-stack"]


def test_agent_list_order_pinned_importance_key(stack, agent_path):
    for key, importance, pinned in [("b", 10, False), ("a", 10, False), ("c", 90, False), ("z", 0, True)]:
        mem(stack, agent_path, key=key, value=f"value {key}", importance=importance, pinned=pinned)
    keys = [r["key"] for r in stack.call("GET", f"{agent_path}/memories").data["items"]]
    assert keys == ["z", "c", "a", "b"]


def test_workspace_list_order_pinned_importance_recent(stack, ws_path, monkeypatch):
    # "Recent" is updatedAt: each write a second after the one before, whatever the machine's clock does.
    from engram.memory import service

    seconds = itertools.count()
    monkeypatch.setattr(service, "now_iso", lambda: f"2026-01-01T00:00:{next(seconds):02d}.000Z")
    for key, importance in [("old", 10), ("new", 10), ("high", 90)]:
        mem(stack, ws_path, key=key, value=f"value {key}", importance=importance)
    pinned = mem(stack, ws_path, key="pin", value="pinned one").data
    stack.call("PATCH", f"{ws_path}/memories/{pinned['id']}/pin", body={"pinned": True})
    keys = [r["key"] for r in stack.call("GET", f"{ws_path}/memories").data["items"]]
    assert keys == ["pin", "high", "new", "old"]


def test_partial_update_pin_and_delete(stack, agent_path):
    row = mem(stack, agent_path, key="k", value="v1").data
    base = f"{agent_path}/memories/{row['id']}"
    patched = stack.call("PATCH", base, body={"importance": 70, "topic": "ops"})
    assert patched.data["importance"] == 70 and patched.data["topic"] == "ops" and patched.data["value"] == "v1"
    assert stack.call("PATCH", f"{base}/pin", body={"pinned": True}).data["pinned"] is True
    assert stack.call("PATCH", base, body={}).error["code"] == "empty_update"
    assert stack.call("PATCH", base, body={"key": "new-key"}).error["field"] == "key"  # keys are immutable
    assert stack.call("DELETE", base).status == 200
    assert stack.call("DELETE", base).status == 404
    assert stack.call("PATCH", f"{agent_path}/memories/m_unknown", body={"value": "x"}).status == 404


def test_only_manual_rows_are_editable_but_all_can_be_pinned_and_deleted(stack, agent_path):
    from engram.kernel.ids import tenant_key
    from engram.memory.service import upsert_memory

    agent_id = agent_path.rsplit("/", 1)[1]
    row, _ = upsert_memory(
        stack.deps, tenant_key("alice"), scope="agent", owner_id=agent_id, key="auto:stack", value="Uses Rust", source="auto"
    )
    base = f"{agent_path}/memories/{row.id}"
    refused = stack.call("PATCH", base, body={"value": "Uses Go"})
    assert refused.status == 409 and refused.error["code"] == "memory_read_only"
    assert stack.call("PATCH", f"{base}/pin", body={"pinned": True}).data["pinned"] is True
    assert stack.call("DELETE", base).status == 200


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"value": "v"}, 400, "key"),
        ({"key": "", "value": "v"}, 400, "key"),
        ({"key": "k" * 256, "value": "v"}, 413, "key"),
        ({"key": "k", "value": "v" * 2001}, 413, "value"),
        ({"key": "k"}, 400, "value"),
        ({"key": "k", "value": "v", "importance": 101}, 400, "importance"),
        ({"key": "k", "value": "v", "importance": "high"}, 400, "importance"),
        ({"key": "k", "value": "v", "source": "auto"}, 400, "source"),
        ({"key": "k", "value": "v", "category": "weekly"}, 400, "category"),
        ({"key": "k", "value": "v", "category": "conversation"}, 400, "category"),
        ({"key": "k", "value": "v", "scope": "user"}, 400, "scope"),
    ],
)
def test_bad_memory_bodies(stack, agent_path, body, status, field):
    r = stack.call("POST", f"{agent_path}/memories", body=body)
    assert (r.status, r.error.get("field")) == (status, field), r.body
    assert stack.call("GET", f"{agent_path}/memories").data["items"] == []


@pytest.mark.parametrize(
    "value",
    [
        "aws key AKIAIOSFODNN7EXAMPLE",
        "my password is hunter2!",
        "token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow",
        "db at postgres://admin:s3cretpw@db.internal:5432/app",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ],
)
def test_secrets_are_refused_and_nothing_is_stored(stack, agent_path, value):
    r = stack.call("POST", f"{agent_path}/memories", body={"key": "creds", "value": value})
    assert r.status == 400 and r.error["code"] == "secret_detected" and r.error["field"] == "value"
    f = stack.call("POST", "/api/me/facts", body={"fact": value})
    assert f.status == 400 and f.error["code"] == "secret_detected"
    assert stack.call("GET", f"{agent_path}/memories").data["items"] == []
    assert stack.call("GET", "/api/me/facts").data["items"] == []


def test_ordinary_text_about_passwords_is_not_a_secret(stack, agent_path):
    r = stack.call(
        "POST",
        f"{agent_path}/memories",
        body={"key": "policy", "value": "Passwords live in 1Password; the deploy key is in SSM."},
    )
    assert r.status == 201


def test_memories_of_unknown_or_foreign_owners(stack, agent_path, ws_path):
    assert mem(stack, agent_path, user="bob", key="k", value="v").status == 404
    assert mem(stack, ws_path, user="bob", key="k", value="v").status == 404
    row = mem(stack, agent_path, key="k", value="v").data
    assert stack.call("GET", f"{agent_path}/memories", user="bob").status == 404
    assert stack.call("PATCH", f"{agent_path}/memories/{row['id']}", user="bob", body={"value": "x"}).status == 404
    assert stack.call("DELETE", f"{agent_path}/memories/{row['id']}", user="bob").status == 404
    assert stack.call("GET", "/api/agents/ag_nope/memories").status == 404
    assert stack.call("GET", "/api/agents/a.b/memories").error["field"] == "agentId"
    assert stack.call("GET", f"{agent_path}/memories").data["items"][0]["value"] == "v"


def test_daily_memories_carry_a_ttl(stack, agent_path):
    row = mem(stack, agent_path, key="standup", value="Standup moved to 10:00 today", category="daily").data
    assert row["expiresAt"] - time.time() == pytest.approx(7 * 86400, abs=120)
    from engram.aws import keys
    from engram.kernel.ids import tenant_key

    item = stack.deps.table.get(keys.agent_pk(tenant_key("alice"), agent_path.rsplit("/", 1)[1]), keys.memory_sk(row["id"]))
    assert item["expiresAt"] == row["expiresAt"]  # the table's TTL attribute
    core = mem(stack, agent_path, key="standup", value="Standup is at 9:30", category="core").data
    assert core["expiresAt"] is None


def test_deleting_a_workspace_deletes_its_memory(stack, ws_path):
    mem(stack, ws_path, key="k", value="v")
    assert stack.call("DELETE", ws_path).status == 200
    ws = stack.call("POST", "/api/workspaces", body={"name": "W2"}).data
    assert stack.call("GET", f"/api/workspaces/{ws['id']}/memories").data["items"] == []


# --- facts ------------------------------------------------------------------------------------
def test_facts_add_list_edit_promote_archive(stack):
    added = stack.call(
        "POST", "/api/me/facts", body={"fact": "I trade BTC and ETH only", "topic": "symbols", "confidence": "inferred"}
    )
    assert added.status == 201 and added.data["source"] == "profile" and added.data["lastReferencedAt"] == added.data["createdAt"]
    fid = added.data["id"]
    assert stack.call("PATCH", f"/api/me/facts/{fid}", body={"confidence": "asserted"}).data["confidence"] == "asserted"
    assert stack.call("PATCH", f"/api/me/facts/{fid}", body={"fact": "I trade BTC only"}).data["fact"] == "I trade BTC only"
    archived = stack.call("DELETE", f"/api/me/facts/{fid}")
    assert archived.data["archivedAt"] and archived.data["archivedReason"] == "user_deleted"
    assert stack.call("GET", "/api/me/facts").data["items"] == []
    everything = stack.call("GET", "/api/me/facts", query={"includeArchived": "true"}).data["items"]
    assert [f["id"] for f in everything] == [fid]
    referenced = everything[0]["lastReferencedAt"]
    restored = stack.call("PATCH", f"/api/me/facts/{fid}", body={"archived": False})
    assert restored.data["archivedAt"] is None
    assert restored.data["lastReferencedAt"] == referenced  # a restore is not a reference
    corrected = stack.call("PATCH", f"/api/me/facts/{fid}", body={"archived": True, "archivedReason": "user_corrected"})
    assert corrected.data["archivedReason"] == "user_corrected"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"fact": "abc"}, "fact"),
        ({"fact": "x" * 501}, "fact"),
        ({"fact": "ok fact", "confidence": "sure"}, "confidence"),
        ({}, "fact"),
    ],
)
def test_bad_fact_bodies(stack, body, field):
    r = stack.call("POST", "/api/me/facts", body=body)
    assert r.status in (400, 413) and r.error["field"] == field
    assert stack.call("GET", "/api/me/facts").data["items"] == []


def test_facts_are_private(stack):
    fid = stack.call("POST", "/api/me/facts", body={"fact": "I live in Lisbon"}).data["id"]
    assert stack.call("GET", "/api/me/facts", user="bob").data["items"] == []
    assert stack.call("PATCH", f"/api/me/facts/{fid}", user="bob", body={"fact": "I live in Oslo"}).status == 404
    assert stack.call("DELETE", f"/api/me/facts/{fid}", user="bob").status == 404
    assert stack.call("GET", "/api/me/facts").data["items"][0]["fact"] == "I live in Lisbon"


def test_restating_a_fact_does_not_duplicate_it(stack):
    first = stack.call("POST", "/api/me/facts", body={"fact": "I prefer tea"})
    second = stack.call("POST", "/api/me/facts", body={"fact": "i prefer TEA."})
    assert first.status == 201 and second.status == 200 and second.data["id"] == first.data["id"]


def test_the_duplicate_check_follows_edits_archives_and_older_facts(stack):
    from engram.facts.models import Fact
    from engram.kernel.ids import tenant_key

    def add(text: str):
        return stack.call("POST", "/api/me/facts", body={"fact": text})

    # Facts stored before the duplicate check had its rows: the first add indexes them.
    old = Fact(id="f_older", created_at="2025-01-01T00:00:00.000Z", updated_at="2025-01-01T00:00:00.000Z", fact="I own a cat")
    stack.deps.facts.put(tenant_key("alice"), old)
    restated = add("I own a CAT")
    assert restated.status == 200 and restated.data["id"] == "f_older"
    # An edited fact is found under its new text, no longer under its old one.
    stack.call("PATCH", "/api/me/facts/f_older", body={"fact": "I own two cats"})
    assert add("i own two cats!").data["id"] == "f_older"
    again = add("I own a cat")
    assert again.status == 201 and again.data["id"] != "f_older"
    # An archived fact is no duplicate; restoring it makes it the holder of its text again.
    stack.call("DELETE", f"/api/me/facts/{again.data['id']}")
    third = add("I own a cat")
    assert third.status == 201 and third.data["id"] not in ("f_older", again.data["id"])
    assert add("I own a cat").data["id"] == third.data["id"]
    stack.call("DELETE", f"/api/me/facts/{third.data['id']}")
    stack.call("PATCH", f"/api/me/facts/{again.data['id']}", body={"archived": False})
    assert add("I own a cat").data["id"] == again.data["id"]


# --- export and delete-me ---------------------------------------------------------------------
def test_export_and_delete_me(stack):
    agent = stack.agent()
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data
    mem(stack, f"/api/agents/{agent['id']}", key="k", value="agent fact")
    mem(stack, f"/api/workspaces/{ws['id']}", key="k", value="workspace fact")
    stack.call("POST", "/api/me/facts", body={"fact": "I like hiking"})
    stack.say(agent["id"], "hello there")
    bob_agent = stack.agent(user="bob")
    stack.say(bob_agent["id"], "bob's words", user="bob")

    export = stack.call("GET", "/api/me/export").data
    assert [a["id"] for a in export["agents"]] == [agent["id"]]
    assert "webhookSecret" not in export["agents"][0]
    assert export["agents"][0]["sessions"][0]["messages"][0]["content"][0]["text"] == "hello there"
    assert export["agents"][0]["memories"][0]["value"] == "agent fact"
    assert export["workspaces"][0]["memories"][0]["value"] == "workspace fact"
    assert export["facts"][0]["fact"] == "I like hiking"
    assert len(export["runs"]) == 1 and len(export["usage"]) == 1
    assert "bob's words" not in str(export)

    gone = stack.call("DELETE", "/api/me").data["deleted"]
    assert gone["agents"] == 1 and gone["workspaces"] == 1 and gone["facts"] == 1 and gone["usageRows"] == 1
    after = stack.call("GET", "/api/me/export").data
    assert (
        after["agents"] == []
        and after["workspaces"] == []
        and after["facts"] == []
        and after["runs"] == []
        and after["usage"] == []
    )
    assert stack.transcript_bytes("alice", agent["id"]) is None
    # bob is untouched
    assert stack.call("GET", f"/api/agents/{bob_agent['id']}/sessions/dashboard", user="bob").data["messageCount"] == 2


def test_upsert_keeps_fields_the_body_leaves_out(stack, agent_path):
    mem(stack, agent_path, key="k", value="v1", pinned=True, importance=80, topic="ops")
    again = mem(stack, agent_path, key="k", value="v2").data
    assert (again["value"], again["pinned"], again["importance"], again["topic"]) == ("v2", True, 80, "ops")
