"""Rotating an agent's webhook secret (POST /api/agents/{agentId}/webhook-secret): the new secret is
shown once; the replaced one keeps working for WEBHOOK_SECRET_GRACE_SECONDS, then is refused."""

from __future__ import annotations

import time

import pytest


def test_a_rotated_secret_is_shown_once_and_the_old_one_works_for_the_grace_period(stack):
    agent = stack.agent()
    old = agent["webhookSecret"]
    rotated = stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret")
    assert rotated.status == 200, rotated.body
    new = rotated.data["webhookSecret"]
    assert new != old and len(new) >= 40 and rotated.data["agentId"] == agent["id"]
    assert rotated.data["previousSecretValidUntil"].endswith("Z")  # 24 h from now by default
    # never shown again
    assert new not in str(stack.call("GET", f"/api/agents/{agent['id']}").body)
    assert new not in str(stack.call("GET", "/api/agents").body)

    assert stack.webhook(agent["id"], new, {"message": "signed with the new secret"}).status == 202
    assert stack.webhook(agent["id"], old, {"message": "a sender not switched over yet"}).status == 202
    assert stack.webhook(agent["id"], "neither", {"message": "forged"}).status == 401

    # a second rotation drops the first secret at once; the second is now the one in grace
    newer = stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret").data["webhookSecret"]
    assert stack.webhook(agent["id"], old, {"message": "too late"}).status == 401
    assert stack.webhook(agent["id"], new, {"message": "still in grace"}).status == 202
    assert stack.webhook(agent["id"], newer, {"message": "current"}).status == 202


def test_the_replaced_secret_is_refused_once_its_grace_period_is_over(stack, monkeypatch: pytest.MonkeyPatch):
    agent = stack.agent()
    old = agent["webhookSecret"]
    new = stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret").data["webhookSecret"]
    later = time.time() + 86_400 + 5
    monkeypatch.setattr("engram.conversations.webhooks.time.time", lambda: later)
    assert stack.webhook(agent["id"], old, {"message": "a day late"}, timestamp=int(later)).status == 401
    assert stack.webhook(agent["id"], new, {"message": "on time"}, timestamp=int(later)).status == 202


def test_with_no_grace_period_the_old_secret_stops_at_once(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"webhook_secret_grace_s": 0})
    agent = stack.agent()
    rotated = stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret")
    assert rotated.data["previousSecretValidUntil"] is None
    assert stack.webhook(agent["id"], agent["webhookSecret"], {"message": "old"}).status == 401
    assert stack.webhook(agent["id"], rotated.data["webhookSecret"], {"message": "new"}).status == 202


def test_only_the_owner_rotates_and_an_unknown_agent_is_a_404(stack):
    agent = stack.agent(user="alice")
    other = stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret", user="mallory")
    assert (other.status, other.error["code"], other.error["field"]) == (404, "not_found", "agentId")
    assert stack.webhook(agent["id"], agent["webhookSecret"], {"message": "unchanged"}).status == 202
    assert stack.call("POST", "/api/agents/ag_nobody/webhook-secret").status == 404
    assert stack.call("POST", "/api/agents/..%2Fx/webhook-secret").status in (400, 404)
    assert stack.call("POST", f"/api/agents/{agent['id']}/webhook-secret", user=None).status == 401
