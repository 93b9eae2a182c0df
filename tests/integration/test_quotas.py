"""Per-user quotas (issue 11, item 6): each create beyond its setting is a 409 quota_exceeded that
names the resource and the limit, deleting one frees room, two creates at the limit cannot both
win, an extraction that meets a full quota stores less instead of failing, and counters that
drifted (rows from before counters existed, rows removed behind their back) are put right."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from engram.agents.models import Agent
from engram.aws import quotas
from engram.conversations.models import Session
from engram.kernel.errors import QuotaExceeded
from engram.kernel.ids import tenant_key
from engram.kernel.model import now_iso
from tests.integration.test_extraction import Claude, answer, dlq_bodies, drain, fact, job, use_claude

T = tenant_key("alice")


def limit(stack, **limits: int) -> None:
    stack.deps.settings = stack.deps.settings.model_copy(update=limits)


def refused(reply, resource: str, most: int) -> None:
    assert reply.status == 409, reply.body
    assert reply.error["code"] == "quota_exceeded" and reply.error["field"] == resource
    assert f"at most {most} {resource}" in reply.error["message"]


def new_agent(stack, **fields: Any):
    return stack.call("POST", "/api/agents", body={"name": "Ada", "persona": "You help.", **fields})


def counter(stack, quota: quotas.Quota) -> int | None:
    item = stack.deps.table.get(quota.pk, quota.sk)
    return None if item is None else int(item["n"])


def test_agents_up_to_the_limit_then_409_and_a_delete_makes_room(stack):
    limit(stack, max_agents=2)
    first, _second = stack.agent(), stack.agent()
    refused(new_agent(stack), "agents", 2)
    assert new_agent(stack, name="Bea").status == 409  # nothing was written by the refused ones
    assert len(stack.call("GET", "/api/agents").data["items"]) == 2
    assert stack.call("POST", "/api/agents", user="bob", body={"name": "B", "persona": "p"}).status == 201  # per user
    assert stack.call("DELETE", f"/api/agents/{first['id']}").status == 200
    assert new_agent(stack).status == 201
    refused(new_agent(stack), "agents", 2)


def test_two_creates_at_the_limit_one_wins(stack):
    limit(stack, max_agents=1)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def create(name: str) -> None:
        now = now_iso()
        agent = Agent(id=f"ag_{name}", created_at=now, updated_at=now, name=name, model="offline")
        dashboard = stack.deps.sessions.item(T, Session(id="dashboard", agent_id=agent.id, created_at=now, updated_at=now))
        barrier.wait()
        try:
            stack.deps.agents.create(T, agent, webhook_secret="s", with_items=[dashboard], max_agents=1, max_scheduled=1)
            outcomes.append("created")
        except QuotaExceeded:
            outcomes.append("refused")

    threads = [threading.Thread(target=create, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created", "refused"]
    assert len(stack.call("GET", "/api/agents").data["items"]) == 1
    assert counter(stack, quotas.agents(T)) == 1


def test_memories_per_scope_manual_rows(stack):
    limit(stack, max_memories_per_scope=2)
    ws = stack.call("POST", "/api/workspaces", body={"name": "Billing"}).data["id"]
    agent = stack.agent()
    path = f"/api/workspaces/{ws}/memories"
    first = stack.call("POST", path, body={"key": "a", "value": "one"}).data
    assert stack.call("POST", path, body={"key": "b", "value": "two"}).status == 201
    refused(stack.call("POST", path, body={"key": "c", "value": "three"}), "memories", 2)
    assert stack.call("POST", path, body={"key": "a", "value": "one, changed"}).status == 200  # an upsert is no create
    # the agent's own memory is another scope, with its own room
    assert stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "c", "value": "x"}).status == 201
    assert stack.call("DELETE", f"{path}/{first['id']}").status == 200
    assert stack.call("POST", path, body={"key": "c", "value": "three"}).status == 201
    refused(stack.call("POST", path, body={"key": "d", "value": "four"}), "memories", 2)


def test_an_extraction_meeting_a_full_quota_stores_less_and_succeeds(stack):
    limit(stack, max_memories_per_scope=2)
    ws = stack.call("POST", "/api/workspaces", body={"name": "Billing"}).data["id"]
    agent = stack.agent(workspaceId=ws, agentMemory=True)
    stack.call("POST", f"/api/workspaces/{ws}/memories", body={"key": "repo", "value": "github.com/acme/billing"})
    claude = Claude(
        (
            200,
            answer(
                [
                    fact("Tech Stack", "The billing service uses Postgres 16 and FastAPI.", confidence=0.95),
                    fact("deploy command", "Deploy with `make deploy` from the repo root.", confidence=0.9),
                    fact("answer-style", "The user wants short answers with code.", scope="agent", confidence=0.8),
                ]
            ),
        )
    )
    use_claude(stack, claude)
    stack.deps.queues.enqueue_extraction(job(agent))
    assert drain(stack) == 1
    assert dlq_bodies(stack) == []  # the job succeeded
    ws_rows = stack.call("GET", f"/api/workspaces/{ws}/memories").data["items"]
    assert len(ws_rows) == 2 and sum(r["source"] == "auto" for r in ws_rows) == 1
    agent_rows = stack.call("GET", f"/api/agents/{agent['id']}/memories").data["items"]
    assert [r["key"] for r in agent_rows] == ["auto:answer-style"]
    marker = stack.deps.table.get(f"{T}#A#{agent['id']}", "EXTRACT#run_1")
    assert marker["status"] == "done" and marker["outcome"]["leftOut"] == 1


def test_facts_count_while_active(stack):
    limit(stack, max_facts=2)
    first = stack.call("POST", "/api/me/facts", body={"fact": "I live in Oslo"}).data
    assert stack.call("POST", "/api/me/facts", body={"fact": "I work at Acme"}).status == 201
    refused(stack.call("POST", "/api/me/facts", body={"fact": "I like tea"}), "facts", 2)
    assert stack.call("DELETE", f"/api/me/facts/{first['id']}").status == 200  # archives it: room again
    assert stack.call("POST", "/api/me/facts", body={"fact": "I like tea"}).status == 201
    refused(stack.call("PATCH", f"/api/me/facts/{first['id']}", body={"archived": False}), "facts", 2)
    active = [f["fact"] for f in stack.call("GET", "/api/me/facts").data["items"]]
    assert sorted(active) == ["I like tea", "I work at Acme"]  # nothing half-written


SIGNAL = {"description": "A call.", "fields": {"risk": {"type": "integer", "min": 0, "max": 10}}}


def test_card_types(stack):
    limit(stack, max_card_types=1)
    assert stack.call("PUT", "/api/card-types/release-call", body=SIGNAL).status == 201
    refused(stack.call("PUT", "/api/card-types/other-call", body=SIGNAL), "cardTypes", 1)
    assert stack.call("PUT", "/api/card-types/release-call", body={**SIGNAL, "description": "Changed."}).status == 200


def test_sessions_per_agent_count_the_dashboard(stack):
    limit(stack, max_sessions_per_agent=3)
    agent = stack.agent()
    path = f"/api/agents/{agent['id']}/sessions"
    assert stack.call("POST", path, body={"id": "s1"}).status == 201
    assert stack.call("POST", path, body={"id": "s2"}).status == 201
    refused(stack.call("POST", path, body={"id": "s3"}), "sessions", 3)
    # a webhook naming a new session too; one naming an existing session is fine
    refused(stack.webhook(agent["id"], agent["webhookSecret"], {"message": "hi", "session_id": "s3"}), "sessions", 3)
    assert stack.webhook(agent["id"], agent["webhookSecret"], {"message": "hi", "session_id": "s2"}).status == 202
    assert stack.call("DELETE", f"{path}/s1").status == 200
    assert stack.call("POST", path, body={"id": "s3"}).status == 201
    assert stack.call("DELETE", f"{path}/dashboard").status == 200  # emptied and re-created: still counted once
    assert counter(stack, quotas.sessions(T, agent["id"])) == 3


def test_agents_with_schedules(stack):
    limit(stack, max_scheduled_agents=1)
    scheduled = stack.agent(schedule="rate(1 hour)", defaultPrompt="Check in.")
    refused(new_agent(stack, schedule="rate(1 hour)", defaultPrompt="Check in."), "scheduledAgents", 1)
    other = stack.agent(defaultPrompt="Check in.")
    refused(stack.call("PATCH", f"/api/agents/{other['id']}", body={"schedule": "rate(2 hours)"}), "scheduledAgents", 1)
    assert stack.call("GET", f"/api/agents/{other['id']}").data["schedule"] is None
    assert stack.call("PATCH", f"/api/agents/{scheduled['id']}", body={"schedule": "rate(3 hours)"}).status == 200
    assert stack.call("PATCH", f"/api/agents/{scheduled['id']}", body={"schedule": None}).status == 200
    assert stack.call("PATCH", f"/api/agents/{other['id']}", body={"schedule": "rate(2 hours)"}).status == 200
    assert stack.call("DELETE", f"/api/agents/{other['id']}").status == 200
    assert stack.agent(schedule="rate(1 hour)", defaultPrompt="Check in.")["schedule"] == "rate(1 hour)"


def test_counters_that_drifted_are_recounted_at_the_limit(stack):
    limit(stack, max_agents=10)
    for _ in range(3):
        stack.agent()
    # rows from before counters existed: no counter at all
    stack.deps.table.delete(*[quotas.agents(T).pk, quotas.agents(T).sk])
    limit(stack, max_agents=3)
    refused(new_agent(stack), "agents", 3)
    assert counter(stack, quotas.agents(T)) == 3
    # a counter higher than the rows (rows removed behind its back): corrected, not refused
    stack.deps.table.update(quotas.agents(T).pk, quotas.agents(T).sk, "SET n = :n", values={":n": 99})
    limit(stack, max_agents=4)
    assert new_agent(stack).status == 201
    assert counter(stack, quotas.agents(T)) == 4


def test_deleting_the_account_leaves_no_counter(stack):
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data["id"]
    agent = stack.agent(workspaceId=ws, schedule="rate(1 hour)", defaultPrompt="Go.")
    stack.call("POST", f"/api/workspaces/{ws}/memories", body={"key": "a", "value": "b"})
    stack.call("POST", "/api/me/facts", body={"fact": "I live in Oslo"})
    stack.call("PUT", "/api/card-types/release-call", body=SIGNAL)
    assert stack.call("DELETE", "/api/me").status == 200
    for quota in (
        quotas.agents(T),
        quotas.scheduled_agents(T),
        quotas.card_types(T),
        quotas.facts(T),
        quotas.sessions(T, agent["id"]),
        quotas.memories(f"{T}#W#{ws}", "workspace"),
    ):
        assert counter(stack, quota) is None, quota.resource


@pytest.mark.parametrize(
    ("expression", "ok"),
    [
        ("rate(5 minutes)", False),
        ("rate(10 minutes)", True),
        ("cron(0/5 * * * ? *)", False),
        ("cron(0,30 * * * ? *)", True),
        ("cron(55 9,10 ? * MON-FRI *)", True),
        ("cron(0,5 9 * * ? *)", False),
    ],
)
def test_the_shortest_schedule_interval_is_a_setting(stack, expression, ok):
    limit(stack, min_schedule_interval_s=600)
    reply = new_agent(stack, schedule=expression, defaultPrompt="Go.")
    if ok:
        assert reply.status == 201, reply.body
    else:
        assert reply.status == 400 and reply.error["code"] == "schedule_too_frequent" and reply.error["field"] == "schedule"
        assert "600 s" in reply.error["message"]


def test_every_minute_is_allowed_by_default(stack):
    assert new_agent(stack, schedule="rate(1 minute)", defaultPrompt="Go.").status == 201
    assert new_agent(stack, schedule="cron(* * * * ? *)", defaultPrompt="Go.").status == 201


def test_counts_with_filters_on_moto(moto_stack):
    """The recount's COUNT Query and its filters (active facts, scheduled agents) as the emulator runs them."""
    limit(moto_stack, max_scheduled_agents=1, max_facts=1)
    moto_stack.agent(schedule="rate(1 hour)", defaultPrompt="Go.")
    moto_stack.agent()  # unscheduled agents do not count
    refused(new_agent(moto_stack, schedule="rate(1 hour)", defaultPrompt="Go."), "scheduledAgents", 1)
    first = moto_stack.call("POST", "/api/me/facts", body={"fact": "I live in Oslo"}).data
    moto_stack.call("DELETE", f"/api/me/facts/{first['id']}")
    quota = quotas.facts(T)
    moto_stack.deps.table.delete(quota.pk, quota.sk)  # as if written before counters: the archived one must not count
    assert moto_stack.call("POST", "/api/me/facts", body={"fact": "I work at Acme"}).status == 201
    refused(moto_stack.call("POST", "/api/me/facts", body={"fact": "I like tea"}), "facts", 1)
