"""Run memory (RM1, RM2) and director learnings (RM4) against moto: the store, the model's tools
through a ToolRegistry, the learnings index, tenant isolation and the agent cascade."""

from __future__ import annotations

import pytest

from engram.aws import keys
from engram.engine.tools import ToolContext, ToolRegistry
from engram.kernel.errors import BadRequest
from engram.kernel.ids import tenant_key
from engram.run_memory.learnings import recent_learnings, render_learnings, store_learning
from engram.run_memory.models import RunMemoryEntry
from engram.run_memory.store import RUN_MEMORY, RunScratchpad, run_memory_listing
from engram.run_memory.tools import register_tools

T = tenant_key("alice")
NESTED = {"findings": ["alpha", {"beta": [1, 2.5, None, True]}], "empty": {}, "blank": "", "unicode": "ünï <b>"}


@pytest.fixture
def store(stack):
    return stack.deps.run_memory


def _agent(stack, user="alice", **fields):
    created = stack.agent(user=user, **fields)
    agent = stack.deps.agents.get(tenant_key(user), created["id"])
    assert agent is not None
    return agent


def _tools():
    registry = ToolRegistry()
    register_tools(registry)
    return registry


def _ctx(stack, agent, rm, t=T):
    return ToolContext(t, agent, "", rm.run_id if rm else "run_1", stack.deps, state={RUN_MEMORY: rm} if rm is not None else {})


def _entry(key, kind, value, created):
    return RunMemoryEntry(key=key, kind=kind, value=value, created_at=created, updated_at=created, value_bytes=1)


# --- the store -----------------------------------------------------------------------------------
def test_put_load_round_trip_and_created_at_kept(stack, store):
    agent = _agent(stack)
    rm = RunScratchpad(store, T, agent.id, "run_1", stack.deps.settings)
    first = rm.set("task:ag_1", "task_result", NESTED, source="ag_1", title="Analyst", description="findings")
    rm.seed_inputs({"topic": "rates", "limits": {"max": [3]}})
    second = rm.set("task:ag_1", "task_result", {"v": 2}, source="ag_1")
    assert second.created_at == first.created_at and second.title is None

    loaded = store.load(T, agent.id, "run_1")
    assert [e.key for e in loaded] == ["task:ag_1", "input:topic", "input:limits"]
    assert loaded[0] == second and loaded[1].value == "rates" and loaded[2].value == {"max": [3]}
    rm.set("shared:n", "shared", NESTED)
    assert RunScratchpad.load(store, T, agent.id, "run_1", stack.deps.settings).get("shared:n").value == NESTED

    listing, nxt = run_memory_listing(stack.deps.run_memory, T, agent.id, "run_1", limit=50, token=None)
    assert [e["key"] for e in listing] == ["input:limits", "input:topic", "shared:n", "task:ag_1"] and nxt is None
    assert listing[2]["value"] == NESTED and listing[2]["valueBytes"] > 0 and "createdAt" in listing[2]
    assert run_memory_listing(stack.deps.run_memory, T, agent.id, "run_2", limit=50, token=None) == ([], None)
    assert store.load(tenant_key("bob"), agent.id, "run_1") == []  # another tenant's partition


def test_put_keeps_the_first_created_at_in_dynamodb(stack, store):
    agent = _agent(stack)
    a = store.put(T, agent.id, "run_1", _entry("shared:x", "shared", 1, "2026-01-01T00:00:00.000001Z"))
    b = store.put(T, agent.id, "run_1", _entry("shared:x", "shared", 2, "2026-01-02T00:00:00.000001Z"))
    assert a.created_at == b.created_at == "2026-01-01T00:00:00.000001Z"
    assert b.value == 2 and b.updated_at == "2026-01-02T00:00:00.000001Z"


def test_put_many_pages_and_loads_every_entry(stack, store):
    agent = _agent(stack)
    big = "x" * 60_000  # ~60 KB each: the load needs several Query pages
    entries = [_entry(f"input:k{i:03d}", "input", big, f"2026-01-01T00:00:00.{i:06d}Z") for i in range(30)]
    store.put_many(T, agent.id, "run_1", entries)
    loaded = store.load(T, agent.id, "run_1")
    assert [e.key for e in loaded] == [e.key for e in entries] and loaded[-1].value == big


# --- the tools ------------------------------------------------------------------------------------
def test_tools_only_with_run_memory(stack, store):
    agent = _agent(stack)
    lead = _agent(stack, team=[agent.id])
    registry = _tools()
    names = lambda ctx: {s["name"] for s in registry.specs(ctx=ctx)}  # noqa: E731
    assert names(_ctx(stack, lead, None)) == set()
    rm = RunScratchpad(store, T, lead.id, "run_1", stack.deps.settings)
    assert names(_ctx(stack, agent, rm)) == {"memory_list", "memory_read", "memory_write"}
    assert names(_ctx(stack, lead, rm)) == {"memory_list", "memory_read", "memory_write", "store_learning"}
    out = registry.call("memory_list", {}, _ctx(stack, lead, None))
    assert out.is_error and "unknown tool" in out.content
    out = registry.call("store_learning", {"learning": "x"}, _ctx(stack, agent, rm))
    assert out.is_error  # not a lead


def test_memory_write_only_shared(stack, store):
    agent = _agent(stack)
    rm = RunScratchpad(store, T, agent.id, "run_1", stack.deps.settings)
    rm.set("task:ag_1", "task_result", "real result", source="ag_1")
    registry, ctx = _tools(), _ctx(stack, agent, rm)
    for key in ("task:ag_1", "input:topic", "step:s1", "other:x"):
        out = registry.call("memory_write", {"key": key, "value": "spoofed"}, ctx)
        assert out.is_error and "only writes shared:" in out.content, key
    assert rm.get("task:ag_1").value == "real result"
    assert store.load(T, agent.id, "run_1")[0].value == "real result" and len(store.load(T, agent.id, "run_1")) == 1

    out = registry.call(
        "memory_write", {"key": "top_source", "value": {"url": "https://example.com"}, "title": "Top source"}, ctx
    )
    assert not out.is_error and out.content["ok"] is True and out.content["key"] == "shared:top_source"
    assert out.content["kind"] == "shared" and out.content["createdAt"]
    again = registry.call("memory_write", {"key": "shared:top_source", "value": "https://example.org"}, ctx).content
    assert again["key"] == "shared:top_source" and again["createdAt"] == out.content["createdAt"]
    stored = store.load(T, agent.id, "run_1")[-1]
    assert (stored.key, stored.source, stored.value) == ("shared:top_source", agent.id, "https://example.org")

    listed = registry.call("memory_list", {"kind": "shared"}, ctx).content
    assert listed["total"] == 1 and listed["entries"][0]["key"] == "shared:top_source" and "value" not in listed["entries"][0]
    assert registry.call("memory_list", {"sources": [agent.id]}, ctx).content["returned"] == 1
    assert registry.call("memory_list", {"kind": ["task_result", "shared"], "key_prefix": "task:"}, ctx).content["total"] == 1

    read = registry.call(
        "memory_read", {"keys": ["shared:top_source", "task:ag_1", "task:nope", "not a key", "shared:top_source"]}, ctx
    ).content
    assert set(read["entries"]) == {"shared:top_source", "task:ag_1"}
    assert read["entries"]["shared:top_source"]["value"] == "https://example.org"
    assert read["missing"] == ["task:nope", "not a key"]
    assert registry.call("memory_read", {"keys": []}, ctx).is_error
    bad = registry.call("memory_write", {"key": "has space", "value": 1}, ctx)
    assert bad.is_error and "run memory key" in bad.content


def test_inputs_and_shared_values_holding_secrets_are_refused_whatever_the_path(stack, store):
    agent = _agent(stack)
    rm = RunScratchpad(store, T, agent.id, "run_1", stack.deps.settings)
    with pytest.raises(BadRequest) as err:
        rm.seed_inputs({"topic": "rates", "db": {"password": "swordfish"}})
    assert err.value.code == "secret_detected"
    registry, ctx = _tools(), _ctx(stack, agent, rm)
    for call in (
        {"key": "db", "value": "the password for the prod db is hunter2"},
        {"key": "note", "value": "fine", "title": "AKIA IOSF ODNN 7EXA MPLE"},
        {"key": "note", "value": "fine", "description": "passcode: 482913"},
    ):
        out = registry.call("memory_write", call, ctx)
        assert out.is_error and "secret" in out.content and "hunter2" not in out.content
    rm.set("step:1", "step_result", {"text": "the run's own output is kept like a transcript"})
    assert [e.key for e in store.load(T, agent.id, "run_1")] == ["step:1"]


def test_memory_write_refuses_secrets_and_oversize(stack, store):
    agent = _agent(stack)
    rm = RunScratchpad(store, T, agent.id, "run_1", stack.deps.settings)
    registry, ctx = _tools(), _ctx(stack, agent, rm)
    out = registry.call(
        "memory_write", {"key": "creds", "value": {"token": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345"}}, ctx
    )
    assert out.is_error and "secret" in out.content
    out = registry.call("memory_write", {"key": "big", "value": "x" * 70_000}, ctx)
    assert out.is_error and "65536" in out.content
    assert store.load(T, agent.id, "run_1") == []


def test_memory_list_cap_with_250_entries(stack, store):
    agent = _agent(stack)
    rm = RunScratchpad(store, T, agent.id, "run_1", stack.deps.settings)
    rm.seed_inputs({f"k{i:03d}": i for i in range(250)})
    out = (
        _tools()
        .call("memory_list", {}, _ctx(stack, agent, RunScratchpad.load(store, T, agent.id, "run_1", stack.deps.settings)))
        .content
    )
    assert (out["total"], out["returned"], out["truncated"]) == (250, 200, True)
    assert [e["key"] for e in out["entries"]] == [f"input:k{i:03d}" for i in range(50, 250)]


# --- director learnings ----------------------------------------------------------------------------
def test_store_learning_tool_for_a_lead(stack, store):
    member = _agent(stack)
    lead = _agent(stack, team=[member.id])
    rm = RunScratchpad(store, T, lead.id, "run_1", stack.deps.settings)
    registry, ctx = _tools(), _ctx(stack, lead, rm)
    out = registry.call("store_learning", {"learning": "Check liquidity before sizing."}, ctx)
    assert not out.is_error and out.content["stored"] is True and out.content["key"].startswith("director:learning:")
    secret = registry.call("store_learning", {"learning": "the api key is sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"}, ctx)
    assert secret.is_error and "secret" in secret.content
    rows = recent_learnings(stack.deps.memories, stack.deps.executor, T, [lead.id], 20)
    assert [m.value for m in rows] == ["Check liquidity before sizing."]
    assert rows[0].source == "director" and rows[0].confidence == "inferred" and rows[0].origin["runId"] == "run_1"


def test_recent_learnings_newest_across_the_team(stack):
    a, b = _agent(stack), _agent(stack)
    lead = _agent(stack, team=[a.id, b.id], agentMemory=True)
    owners = [lead.id, a.id, b.id]
    stored = [
        store_learning(stack.deps.memories, stack.deps.settings, T, owners[i % 3], f"learning number {i}", origin=None)
        for i in range(25)
    ]
    assert len({m.key for m in stored}) == 25  # successive learnings never overwrite each other

    rows = recent_learnings(stack.deps.memories, stack.deps.executor, T, [lead.id, a.id, b.id], 20)
    assert [m.value for m in rows] == [f"learning number {i}" for i in range(24, 4, -1)]
    assert recent_learnings(stack.deps.memories, stack.deps.executor, T, [lead.id], 3) == [stored[24], stored[21], stored[18]]

    section = render_learnings(rows)
    assert section.startswith("## Director learnings") and '<memory scope="director">' in section
    assert section.index('"learning number 24"') < section.index('"learning number 5"') and 'learning number 4"' not in section
    assert render_learnings([]) is None

    # Not in the `## Agent Memory` rank index, but still listed (and deletable) over REST.
    stack.call("POST", f"/api/agents/{lead.id}/memories", body={"key": "style", "value": "Be brief."})
    top = stack.deps.memories.top(T, "agent", lead.id, limit=50, session_id="dashboard")
    assert [m.key for m in top] == ["style"]
    listed = stack.call("GET", f"/api/agents/{lead.id}/memories").data["items"]
    assert sum(r["key"].startswith("director:learning:") for r in listed) == 9

    # Archived learnings drop out.
    from engram.memory.service import archive_memory

    archive_memory(stack.deps.memories, T, stored[24], lead.id, "agent_forget")
    assert recent_learnings(stack.deps.memories, stack.deps.executor, T, owners, 1)[0].value == "learning number 23"

    # Another user's tenant never sees them, even with the same agent ids.
    bob = tenant_key("bob")
    assert recent_learnings(stack.deps.memories, stack.deps.executor, bob, owners, 20) == []
    bobs = _agent(stack, user="bob")
    store_learning(stack.deps.memories, stack.deps.settings, bob, bobs.id, "bob's own", origin=None)
    assert [m.value for m in recent_learnings(stack.deps.memories, stack.deps.executor, T, [*owners, bobs.id], 30)][
        -1
    ] == "learning number 0"
    assert all(
        m.value != "bob's own" for m in recent_learnings(stack.deps.memories, stack.deps.executor, T, [*owners, bobs.id], 30)
    )


def test_deleting_the_agent_removes_run_memory_and_learnings(stack, store):
    agent = _agent(stack)
    other = _agent(stack)
    for owner in (agent, other):
        rm = RunScratchpad(store, T, owner.id, "run_1", stack.deps.settings)
        rm.seed_inputs({"topic": "rates"})
        rm.set("shared:x", "shared", NESTED)
        store_learning(stack.deps.memories, stack.deps.settings, T, owner.id, "a lesson", origin=None)
    r = stack.call("DELETE", f"/api/agents/{agent.id}")
    assert r.status == 200, r.body
    assert (
        store.load(T, agent.id, "run_1") == []
        and recent_learnings(stack.deps.memories, stack.deps.executor, T, [agent.id], 20) == []
    )
    remaining = stack.deps.table.query_all(keys.agent_pk(T, agent.id))
    assert remaining == []
    assert (
        len(store.load(T, other.id, "run_1")) == 2
        and len(recent_learnings(stack.deps.memories, stack.deps.executor, T, [other.id], 20)) == 1
    )
