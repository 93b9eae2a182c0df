"""Agents and workspaces over the api function: CRUD, bad input, isolation and cascade delete."""

from __future__ import annotations

import pytest


def test_create_get_list_update_agent(stack):
    created = stack.agent(model="claude-haiku-4-5", agentMemory=True)
    assert created["name"] == "Ada" and created["model"] == "claude-haiku-4-5" and created["agentMemory"] is True
    assert created["webhookSecret"] and created["id"].startswith("ag_")
    assert {
        "createdAt",
        "updatedAt",
        "workspaceId",
        "activeMemory",
        "reviewDecisions",
        "defaultPrompt",
        "schedule",
        "cardType",
        "team",
    } <= set(created)

    got = stack.call("GET", f"/api/agents/{created['id']}")
    assert got.status == 200 and got.data["persona"] == "You help."
    assert "webhookSecret" not in got.data  # shown once, at creation

    listed = stack.call("GET", "/api/agents")
    assert [a["id"] for a in listed.data["items"]] == [created["id"]]
    assert "webhookSecret" not in listed.data["items"][0]

    patched = stack.call("PATCH", f"/api/agents/{created['id']}", body={"persona": "Terse.", "activeMemory": True})
    assert patched.status == 200 and patched.data["persona"] == "Terse." and patched.data["activeMemory"] is True
    assert patched.data["name"] == "Ada" and patched.data["updatedAt"] >= created["updatedAt"]


def test_agent_model_defaults_to_the_configured_chat_model(stack):
    assert stack.agent()["model"] == stack.deps.settings.chat_model


def test_agent_list_pages(stack):
    ids = {stack.agent(name=f"a{i}")["id"] for i in range(3)}
    first = stack.call("GET", "/api/agents", query={"limit": "2"})
    assert len(first.data["items"]) == 2 and first.data["nextToken"]
    second = stack.call("GET", "/api/agents", query={"limit": "2", "nextToken": first.data["nextToken"]})
    assert {a["id"] for a in first.data["items"] + second.data["items"]} == ids


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": 5}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "a", "persona": "p" * 8001}, "persona"),
        ({"name": "a", "agentMemory": "sometimes"}, "agentMemory"),
        ({"name": "a", "model": "../etc/passwd"}, "model"),
        ({"name": "a", "workspaceId": "../x"}, "workspaceId"),
        ({"name": "a", "schedule": "every now and then"}, "schedule"),
        ({"name": "a", "team": ["ok", "not ok"]}, "team.1"),
        ({"name": "a", "colour": "red"}, "colour"),
    ],
)
def test_bad_agent_bodies_name_the_field_and_write_nothing(stack, body, field):
    r = stack.call("POST", "/api/agents", body=body)
    assert r.status == 400, r.body
    assert r.body["success"] is False and r.error["field"] == field and r.error["message"]
    assert stack.call("GET", "/api/agents").data["items"] == []


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"a string"', ""])
def test_body_that_is_not_a_json_object(stack, raw):
    r = stack.call("POST", "/api/agents", raw=raw)
    assert r.status == 400 and r.error["field"] == "body"


def test_oversize_body_is_413(stack):
    r = stack.call("POST", "/api/agents", raw='{"name": "' + "x" * 300_000 + '"}')
    assert r.status == 413 and r.error["code"] == "payload_too_large"


@pytest.mark.parametrize("agent_id", ["..", "a.b", "x" * 65, "a%2Fb", "%2E%2E"])
def test_path_like_or_oversize_ids_are_rejected_before_any_key(stack, agent_id):
    r = stack.call("GET", f"/api/agents/{agent_id}")
    assert r.status in (400, 404), r.body
    assert r.body.get("success") is not True  # the gateway's own 404 has no envelope
    if r.status == 400:
        assert r.error["field"] == "agentId"


def test_unknown_agent_is_404(stack):
    r = stack.call("GET", "/api/agents/ag_nope")
    assert r.status == 404 and r.error["field"] == "agentId"
    assert stack.call("PATCH", "/api/agents/ag_nope", body={"name": "x"}).status == 404
    assert stack.call("DELETE", "/api/agents/ag_nope").status == 404


def test_patch_rules(stack):
    agent = stack.agent()
    path = f"/api/agents/{agent['id']}"
    assert stack.call("PATCH", path, body={}).error["code"] == "empty_update"
    r = stack.call("PATCH", path, body={"name": None})
    assert r.status == 400 and r.error["field"] == "name"
    r = stack.call("PATCH", path, body={"webhookSecret": "mine"})
    assert r.status == 400 and r.error["field"] == "webhookSecret"
    r = stack.call("PATCH", path, body={"workspaceId": "ws_missing"})
    assert r.status == 404 and r.error["field"] == "workspaceId"
    unchanged = stack.call("GET", path).data
    assert unchanged["name"] == "Ada" and unchanged["workspaceId"] is None and unchanged["updatedAt"] == agent["updatedAt"]


def test_missing_auth_is_401(stack):
    r = stack.call("GET", "/api/agents", user=None)
    assert r.status == 401


def test_another_users_agent_is_invisible(stack):
    agent = stack.agent(user="alice")
    path = f"/api/agents/{agent['id']}"
    assert stack.call("GET", path, user="bob").status == 404
    assert stack.call("PATCH", path, user="bob", body={"name": "mine"}).status == 404
    assert stack.call("DELETE", path, user="bob").status == 404
    assert stack.call("GET", "/api/agents", user="bob").data["items"] == []
    assert stack.call("GET", path, user="alice").data["name"] == "Ada"


def test_paging_token_cannot_cross_tenants(stack):
    for i in range(2):
        stack.agent(user="alice", name=f"a{i}")
    token = stack.call("GET", "/api/agents", user="alice", query={"limit": "1"}).data["nextToken"]
    r = stack.call("GET", "/api/agents", user="bob", query={"limit": "1", "nextToken": token})
    assert r.status == 400 and r.error["field"] == "nextToken"


def test_workspaces_crud_and_agents_in_them(stack):
    ws = stack.call("POST", "/api/workspaces", body={"name": "Research", "description": "papers"})
    assert ws.status == 201
    ws_id = ws.data["id"]
    assert stack.call("GET", f"/api/workspaces/{ws_id}").data["name"] == "Research"
    assert stack.call("PATCH", f"/api/workspaces/{ws_id}", body={"name": "R&D"}).data["name"] == "R&D"
    assert [w["id"] for w in stack.call("GET", "/api/workspaces").data["items"]] == [ws_id]

    agent = stack.agent(workspaceId=ws_id)
    assert agent["workspaceId"] == ws_id
    r = stack.call("DELETE", f"/api/workspaces/{ws_id}")
    assert r.status == 409 and r.error["code"] == "workspace_in_use"

    moved = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"workspaceId": None})
    assert moved.data["workspaceId"] is None
    assert stack.call("DELETE", f"/api/workspaces/{ws_id}").status == 200
    assert stack.call("GET", f"/api/workspaces/{ws_id}").status == 404


def test_agent_in_unknown_or_foreign_workspace_is_refused(stack):
    ws_id = stack.call("POST", "/api/workspaces", user="bob", body={"name": "Bob's"}).data["id"]
    r = stack.call("POST", "/api/agents", body={"name": "a", "workspaceId": ws_id})
    assert r.status == 404 and r.error["field"] == "workspaceId"
    assert stack.call("GET", "/api/agents").data["items"] == []  # nothing half-written
    assert stack.call("GET", f"/api/workspaces/{ws_id}", user="alice").status == 404


def test_bad_workspace_input(stack):
    assert stack.call("POST", "/api/workspaces", body={"name": ""}).error["field"] == "name"
    assert stack.call("POST", "/api/workspaces", body={"name": "a", "description": "d" * 2001}).error["field"] == "description"
    assert stack.call("GET", "/api/workspaces/ws_none").status == 404


def test_deleting_an_agent_removes_sessions_transcripts_and_runs(stack):
    agent = stack.agent()
    other = stack.agent(name="Other")
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "second"})
    assert stack.say(agent["id"], "hello").status == 200
    run_id = stack.say(agent["id"], "again", session="second").data["runId"]
    assert stack.say(other["id"], "hi").status == 200
    assert stack.transcript_bytes("alice", agent["id"]) is not None

    r = stack.call("DELETE", f"/api/agents/{agent['id']}")
    assert r.status == 200 and r.data["sessionsDeleted"] == 2 and r.data["transcriptsDeleted"] == 2
    assert stack.call("GET", f"/api/agents/{agent['id']}").status == 404
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions").status == 404
    assert stack.call("GET", f"/api/runs/{run_id}").status == 404
    assert stack.transcript_bytes("alice", agent["id"]) is None
    assert stack.transcript_bytes("alice", agent["id"], "second") is None
    # the other agent is untouched
    assert stack.transcript_bytes("alice", other["id"]) is not None
    assert stack.call("GET", f"/api/agents/{other['id']}/sessions/dashboard").data["messageCount"] == 2


def test_snake_case_field_names_are_unknown_fields(stack):
    r = stack.call("POST", "/api/agents", body={"name": "a", "agent_memory": True})
    assert r.status == 400 and r.error["field"] == "agent_memory"


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"name": ""}, "name", "name must not be empty"),
        ({"name": "x" * 101}, "name", "name must be at most 100 characters"),
        ({"name": "A", "schedule": "every 5 minutes", "defaultPrompt": "Go."}, "schedule", "schedule must be rate(<number>"),
        ({"name": "A", "agentMemory": "maybe"}, "agentMemory", "agentMemory must be true or false"),
        ({"name": "A", "colour": "red"}, "colour", "colour is not a known field"),
    ],
)
def test_validation_messages_name_the_field_and_the_rule_in_words(stack, body, field, words):
    r = stack.call("POST", "/api/agents", body=body)
    assert r.status == 400 and r.error["field"] == field, r.body
    assert r.error["message"].startswith(words), r.error["message"]
    assert "String should" not in r.error["message"] and "^(" not in r.error["message"]  # no pydantic text, no regex
