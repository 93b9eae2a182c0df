"""Every repository and store of `wiring.Stores` over the single table, on the fake and on moto:
what each port promises (round trips, conditional writes turned into domain errors, paging,
deletes, tenant isolation), observed through the port's own methods."""

from __future__ import annotations

from typing import Any

import pytest

from engram.agents.models import Agent, Workspace
from engram.aws.table import ConditionFailed
from engram.cards.models import CardType
from engram.conversations.models import RunningSummary, Session
from engram.extraction.models import AlreadyExtracted, Claim, ExtractionBusy, LeaseLost, RowsChanged, RowWrite
from engram.facts.models import Fact
from engram.kernel.errors import BadRequest, Conflict, NotFound, SessionBusy
from engram.kernel.ids import tenant_key
from engram.memory.models import Memory
from engram.run_memory.models import RunMemoryEntry
from engram.runs.models import Run
from engram.usage.models import Usage, UsageRow
from engram.wiring.stores import Stores

T = tenant_key("alice")
T2 = tenant_key("bob")
NOW = "2026-03-01T12:00:00.000Z"
FAR_FUTURE = 4_102_444_800  # 2100-01-01, epoch seconds


def ts(second: int, minute: int = 0) -> str:
    return f"2026-01-01T00:{minute:02d}:{second:02d}.000Z"


@pytest.fixture
def stores(backend) -> Stores:
    return backend.stores  # type: ignore[no-any-return]


def _agent(stores: Stores, agent_id: str = "ag_1", *, t: str = T, workspace_id: str | None = None, **fields: Any) -> Agent:
    agent = Agent(id=agent_id, name="Ada", model="claude-x", workspace_id=workspace_id, created_at=NOW, updated_at=NOW, **fields)
    dashboard = Session(id="dashboard", agent_id=agent_id, created_at=NOW, updated_at=NOW)
    stores.agents.create(
        t,
        agent,
        webhook_secret=f"secret-{agent_id}",
        with_items=[stores.sessions.item(t, dashboard)],
        max_agents=100,
        max_scheduled=10,
    )
    return agent


def _session(stores: Stores, session_id: str, agent_id: str = "ag_1", *, t: str = T, **fields: Any) -> Session:
    session = Session(id=session_id, agent_id=agent_id, created_at=NOW, updated_at=NOW, **fields)
    assert stores.sessions.create(t, session, limit=100) is True
    return session


def _run(run_id: str, agent_id: str = "ag_1", **fields: Any) -> Run:
    return Run(id=run_id, agent_id=agent_id, created_at=fields.pop("created_at", NOW), updated_at=NOW, **fields)


def _usage(
    usage_id: str, created_at: str, *, agent_id: str = "ag_1", session_key: str = "dashboard", cost: float = 0.5
) -> UsageRow:
    return UsageRow(
        id=usage_id,
        created_at=created_at,
        agent_id=agent_id,
        session_key=session_key,
        run_id=f"run_{usage_id}",
        model="claude-x",
        input_tokens=100,
        output_tokens=20,
        cost_usd=cost,
    )


def _memory(mid: str, *, scope: str = "workspace", updated_at: str = NOW, **fields: Any) -> Memory:
    return Memory(
        id=mid,
        key=fields.pop("key", f"key-{mid}"),
        value=fields.pop("value", f"value of {mid}"),
        scope=scope,
        created_at=fields.pop("created_at", updated_at),
        updated_at=updated_at,
        **fields,
    )


def _fact(fid: str, *, created_at: str = NOW, **fields: Any) -> Fact:
    return Fact(id=fid, fact=fields.pop("fact", f"fact {fid}"), created_at=created_at, updated_at=created_at, **fields)


def _all_pages(fetch: Any, limit: int) -> tuple[list[Any], int]:
    """Every item of a paged list, and how many pages it took."""
    seen: list[Any] = []
    token, pages = None, 0
    while True:
        items, token = fetch(limit=limit, token=token)
        pages += 1
        assert len(items) <= limit
        seen += items
        if token is None:
            return seen, pages


# --- workspaces -----------------------------------------------------------------------------------
def test_workspaces_round_trip_and_refuse_a_second_create(stores):
    ws = Workspace(id="ws_1", name="Research", description="notes", created_at=NOW, updated_at=NOW)
    stores.workspaces.put(T, ws)
    assert stores.workspaces.get(T, "ws_1") == ws
    with pytest.raises(ConditionFailed):
        stores.workspaces.put(T, ws.model_copy(update={"name": "Other"}))
    assert stores.workspaces.get(T, "ws_1") == ws
    assert stores.workspaces.get(T2, "ws_1") is None and stores.workspaces.get(T, "ws_2") is None


def test_workspaces_update_and_delete_or_say_not_found(stores):
    stores.workspaces.put(T, Workspace(id="ws_1", name="Research", description="notes", created_at=NOW, updated_at=NOW))
    updated = stores.workspaces.update(T, "ws_1", {"name": "Renamed", "description": None, "updatedAt": ts(5)})
    assert (updated.name, updated.description, updated.updated_at, updated.created_at) == ("Renamed", "", ts(5), NOW)
    assert stores.workspaces.get(T, "ws_1") == updated
    for t, wid in ((T, "ws_missing"), (T2, "ws_1")):
        with pytest.raises(NotFound) as err:
            stores.workspaces.update(t, wid, {"name": "x"})
        assert err.value.field == "workspaceId"
        with pytest.raises(NotFound):
            stores.workspaces.delete(t, wid)
    assert stores.workspaces.get(T, "ws_missing") is None  # the refused update created nothing
    stores.workspaces.delete(T, "ws_1")
    assert stores.workspaces.get(T, "ws_1") is None
    with pytest.raises(NotFound):
        stores.workspaces.delete(T, "ws_1")


def test_workspaces_page_with_tokens_and_only_the_tenants_workspaces(stores):
    for i in range(5):
        stores.workspaces.put(T, Workspace(id=f"ws_{i}", name=f"W{i}", created_at=NOW, updated_at=NOW))
    stores.workspaces.put(T2, Workspace(id="ws_9", name="theirs", created_at=NOW, updated_at=NOW))
    _agent(stores)  # same tenant partition, another kind of row
    seen, pages = _all_pages(lambda **kw: stores.workspaces.page(T, **kw), 2)
    assert ([w.id for w in seen], pages) == ([f"ws_{i}" for i in range(5)], 3)
    _, token = stores.workspaces.page(T, limit=2, token=None)
    with pytest.raises(BadRequest):
        stores.workspaces.page(T2, limit=2, token=token)
    assert [w.id for w in stores.workspaces.page(T2, limit=10, token=None)[0]] == ["ws_9"]


# --- agents ---------------------------------------------------------------------------------------
def test_an_agent_is_created_with_its_session_secret_and_lookup(stores):
    agent = _agent(stores, persona="helpful", team=["ag_2"])
    assert stores.agents.get(T, "ag_1") == agent
    assert stores.agents.webhook_credentials("ag_1") == (T, "secret-ag_1", "", 0)
    assert stores.sessions.get(T, "ag_1", "dashboard") is not None
    assert stores.agents.get(T2, "ag_1") is None
    assert stores.agents.webhook_credentials("ag_nobody") is None
    _agent(stores, "ag_b", t=T2)
    assert stores.agents.webhook_credentials("ag_b") == (T2, "secret-ag_b", "", 0)


def test_a_rotated_webhook_secret_keeps_the_one_it_replaced_for_a_while(stores):
    _agent(stores)
    stores.agents.rotate_webhook_secret(T, "ag_1", "second", previous_until=2_000_000_000)
    assert stores.agents.webhook_credentials("ag_1") == (T, "second", "secret-ag_1", 2_000_000_000)
    stores.agents.rotate_webhook_secret(T, "ag_1", "third", previous_until=2_000_000_100)
    assert stores.agents.webhook_credentials("ag_1") == (T, "third", "second", 2_000_000_100)  # the first is gone
    assert stores.agents.get(T, "ag_1") is not None and "secret" not in stores.agents.get(T, "ag_1").model_dump_json()
    with pytest.raises(NotFound):
        stores.agents.rotate_webhook_secret(T2, "ag_1", "x", previous_until=0)  # another tenant's agent
    with pytest.raises(NotFound):
        stores.agents.rotate_webhook_secret(T, "ag_nobody", "x", previous_until=0)
    assert stores.agents.get(T, "ag_nobody") is None  # no row made by the failed update
    assert stores.agents.webhook_credentials("ag_1") == (T, "third", "second", 2_000_000_100)


def test_a_webhook_delivery_is_recorded_once_per_agent(stores):
    _agent(stores)
    digest = "a" * 64
    assert stores.agents.first_delivery(T, "ag_1", digest, expires_at=2_000_000_000) is True
    assert stores.agents.first_delivery(T, "ag_1", digest, expires_at=2_000_000_000) is False  # a replay
    assert stores.agents.first_delivery(T, "ag_1", "b" * 64, expires_at=2_000_000_000) is True
    assert stores.agents.first_delivery(T2, "ag_1", digest, expires_at=2_000_000_000) is True  # another tenant's
    assert sorted(stores.agents.delete_cascade(T, "ag_1")) == ["dashboard"]  # the delivery rows go with the agent
    assert stores.agents.first_delivery(T, "ag_1", digest, expires_at=2_000_000_000) is True


def test_a_second_create_of_an_agent_changes_nothing(stores):
    agent = _agent(stores)
    again = agent.model_copy(update={"name": "Impostor"})
    other_session = Session(id="other", agent_id="ag_1", created_at=NOW, updated_at=NOW)
    with pytest.raises(ConditionFailed) as err:
        stores.agents.create(
            T, again, webhook_secret="new", with_items=[stores.sessions.item(T, other_session)], max_agents=100, max_scheduled=10
        )
    assert err.value.failed_at(0)
    assert stores.agents.get(T, "ag_1") == agent and stores.agents.webhook_credentials("ag_1") == (T, "secret-ag_1", "", 0)
    assert stores.sessions.get(T, "ag_1", "other") is None  # the transaction's other put did not apply


def test_an_agent_joins_only_a_workspace_that_exists(stores):
    with pytest.raises(NotFound) as err:
        _agent(stores, workspace_id="ws_missing")
    assert err.value.field == "workspaceId"
    assert stores.agents.get(T, "ag_1") is None and stores.sessions.get(T, "ag_1", "dashboard") is None
    assert stores.agents.webhook_credentials("ag_1") is None
    stores.workspaces.put(T, Workspace(id="ws_1", name="W", created_at=NOW, updated_at=NOW))
    stores.workspaces.put(T2, Workspace(id="ws_2", name="theirs", created_at=NOW, updated_at=NOW))
    _agent(stores, workspace_id="ws_1")
    _agent(stores, "ag_2")
    with pytest.raises(NotFound):  # another tenant's workspace is not there for this tenant
        _agent(stores, "ag_3", workspace_id="ws_2")
    assert stores.agents.in_workspace(T, "ws_1") == ["ag_1"]
    assert stores.agents.in_workspace(T2, "ws_1") == []


def test_agent_updates_move_only_into_an_existing_workspace(stores):
    _agent(stores, schedule="rate(1 hour)")
    stores.workspaces.put(T, Workspace(id="ws_1", name="W", created_at=NOW, updated_at=NOW))
    updated = stores.agents.update(T, "ag_1", {"name": "Bea", "schedule": None, "updatedAt": ts(1)})
    assert (updated.name, updated.schedule, updated.updated_at, updated.model) == ("Bea", None, ts(1), "claude-x")
    moved = stores.agents.update(T, "ag_1", {"workspaceId": "ws_1", "persona": "p"})
    assert (moved.workspace_id, moved.persona, moved.name) == ("ws_1", "p", "Bea")
    assert stores.agents.in_workspace(T, "ws_1") == ["ag_1"]
    with pytest.raises(NotFound) as err:
        stores.agents.update(T, "ag_1", {"workspaceId": "ws_missing"})
    assert err.value.field == "workspaceId"
    assert stores.agents.get(T, "ag_1") == moved
    for changes in ({"name": "x"}, {"workspaceId": "ws_1"}):
        with pytest.raises(NotFound) as err:
            stores.agents.update(T, "ag_missing", changes)
        assert err.value.field == "agentId"
        with pytest.raises(NotFound):
            stores.agents.update(T2, "ag_1", changes)
    assert stores.agents.get(T, "ag_missing") is None


def test_agents_page_with_tokens(stores):
    for i in range(5):
        _agent(stores, f"ag_{i}")
    _agent(stores, "ag_9", t=T2)
    seen, pages = _all_pages(lambda **kw: stores.agents.page(T, **kw), 3)
    assert ([a.id for a in seen], pages) == ([f"ag_{i}" for i in range(5)], 2)
    assert [a.id for a in stores.agents.page(T2, limit=10, token=None)[0]] == ["ag_9"]


def test_delete_cascade_removes_everything_of_the_agent_and_nothing_else(stores):
    _agent(stores)
    _agent(stores, "ag_2")
    for i in range(3):
        _session(stores, f"s{i}")
    _session(stores, "s0", "ag_2")
    for i in range(30):
        stores.runs.create(T, _run(f"run_{i:02d}"))
    stores.runs.create(T, _run("run_other", "ag_2"))
    stores.memories.put(T, _memory("m_1", scope="agent"), "ag_1")
    stores.memories.put(T, _memory("m_2", scope="agent"), "ag_2")
    stores.archive.put_many(
        T, "ag_1", stores.archive.items_for_turn(T, "ag_1", "s0", "run_00", [{"role": "user", "content": "hi"}], ts(1))
    )
    stores.run_memory.put(
        T, "ag_1", "run_00", RunMemoryEntry(key="shared:x", kind="shared", value=1, created_at=ts(1), updated_at=ts(1))
    )

    assert sorted(stores.agents.delete_cascade(T, "ag_1")) == ["dashboard", "s0", "s1", "s2"]
    assert stores.agents.get(T, "ag_1") is None and stores.agents.webhook_credentials("ag_1") is None
    assert stores.sessions.page(T, "ag_1", limit=10, token=None) == ([], None)
    assert stores.runs.page(T, "ag_1", limit=10, token=None) == ([], None) and stores.runs.get(T, "run_05") is None
    assert stores.memories.all(T, "agent", "ag_1") == [] and stores.archive.load_since(T, "ag_1", None) == []
    assert stores.run_memory.load(T, "ag_1", "run_00") == []
    # the other agent keeps everything
    assert stores.agents.get(T, "ag_2") is not None and stores.runs.get(T, "run_other") is not None
    assert [s.id for s in stores.sessions.page(T, "ag_2", limit=10, token=None)[0]] == ["dashboard", "s0"]
    assert [m.id for m in stores.memories.all(T, "agent", "ag_2")] == ["m_2"]
    assert stores.agents.delete_cascade(T, "ag_1") == []  # a retry finds nothing left


# --- sessions -------------------------------------------------------------------------------------
def test_sessions_are_created_only_for_an_existing_agent_and_once(stores):
    with pytest.raises(NotFound) as err:
        stores.sessions.create(T, Session(id="s1", agent_id="ag_1", created_at=NOW, updated_at=NOW), limit=100)
    assert err.value.field == "agentId"
    _agent(stores)
    with pytest.raises(NotFound):  # the agent of another tenant
        stores.sessions.create(T2, Session(id="s1", agent_id="ag_1", created_at=NOW, updated_at=NOW), limit=100)
    session = _session(stores, "s1", title="hello")
    item = stores.sessions.get(T, "ag_1", "s1")
    assert Session.model_validate(item) == session and item is not None and item["agentId"] == "ag_1"
    with pytest.raises(Conflict) as err:
        stores.sessions.create(T, session.model_copy(update={"title": "again"}), limit=100)
    assert err.value.code == "session_exists"
    assert stores.sessions.create(T, session.model_copy(update={"title": "again"}), limit=100, if_absent_ok=True) is False
    assert (stores.sessions.get(T, "ag_1", "s1") or {})["title"] == "hello"
    assert stores.sessions.get(T2, "ag_1", "s1") is None


def test_sessions_page_with_tokens(stores):
    _agent(stores)
    for i in range(4):
        _session(stores, f"s{i}")
    stores.memories.put(T, _memory("m_1", scope="agent"), "ag_1")  # same partition, not a session
    seen, pages = _all_pages(lambda **kw: stores.sessions.page(T, "ag_1", **kw), 2)
    assert ([s.id for s in seen], pages) == (["dashboard", "s0", "s1", "s2", "s3"], 3)
    _, token = stores.sessions.page(T, "ag_1", limit=2, token=None)
    with pytest.raises(BadRequest):
        stores.sessions.page(T2, "ag_1", limit=2, token=token)


def test_one_lease_at_a_time_released_only_by_its_owner(stores):
    _agent(stores)
    state = stores.sessions.acquire_lease(T, "ag_1", "dashboard", "run_1", 60)
    item = stores.sessions.get(T, "ag_1", "dashboard")
    assert state.lease_owner == "run_1" and state == stores.sessions.state(T, "ag_1", "dashboard")
    assert item is not None and item["leaseOwner"] == "run_1" and item["leaseUntil"] > 0 and item["agentId"] == "ag_1"
    with pytest.raises(SessionBusy):
        stores.sessions.acquire_lease(T, "ag_1", "dashboard", "run_2", 60)
    with pytest.raises(SessionBusy) as err:
        stores.sessions.wait_for_lease(T, "ag_1", "dashboard", "run_2", 60, 0, "busy, try later")
    assert err.value.message == "busy, try later"
    stores.sessions.release_lease(T, "ag_1", "dashboard", "run_2")  # not the owner: nothing happens
    with pytest.raises(SessionBusy):
        stores.sessions.acquire_lease(T, "ag_1", "dashboard", "run_2", 60)
    stores.sessions.release_lease(T, "ag_1", "dashboard", "run_1")
    released = stores.sessions.get(T, "ag_1", "dashboard")
    assert released is not None and "leaseOwner" not in released and "leaseUntil" not in released
    stores.sessions.release_lease(T, "ag_1", "dashboard", "run_1")  # twice is fine
    assert stores.sessions.wait_for_lease(T, "ag_1", "dashboard", "run_2", 60, 0, "busy").lease_owner == "run_2"
    with pytest.raises(NotFound):
        stores.sessions.acquire_lease(T, "ag_1", "missing", "run_1", 60)
    with pytest.raises(NotFound):
        stores.sessions.acquire_lease(T2, "ag_1", "dashboard", "run_1", 60)
    assert stores.sessions.get(T, "ag_1", "missing") is None and stores.sessions.state(T, "ag_1", "missing") is None


def test_an_expired_lease_can_be_taken_over(stores):
    _agent(stores)
    stores.sessions.acquire_lease(T, "ag_1", "dashboard", "run_1", -10)  # ran out already
    assert stores.sessions.acquire_lease(T, "ag_1", "dashboard", "run_2", 60).lease_owner == "run_2"
    stores.sessions.release_lease(T, "ag_1", "dashboard", "run_1")  # the old owner's release is a no-op
    assert (stores.sessions.get(T, "ag_1", "dashboard") or {})["leaseOwner"] == "run_2"


def test_a_session_is_deleted_only_when_free(stores):
    _agent(stores)
    _session(stores, "s1")
    stores.sessions.acquire_lease(T, "ag_1", "s1", "run_1", 60)
    with pytest.raises(SessionBusy):
        stores.sessions.delete(T, "ag_1", "s1")
    assert stores.sessions.get(T, "ag_1", "s1") is not None
    stores.sessions.release_lease(T, "ag_1", "s1", "run_1")
    stores.sessions.delete(T, "ag_1", "s1")
    assert stores.sessions.get(T, "ag_1", "s1") is None
    with pytest.raises(NotFound):
        stores.sessions.delete(T, "ag_1", "s1")
    with pytest.raises(NotFound):
        stores.sessions.delete(T2, "ag_1", "dashboard")
    assert stores.sessions.get(T, "ag_1", "dashboard") is not None


def test_the_running_summary_is_stored_over_the_one_read_and_read_back_typed(stores):
    _agent(stores)
    _session(stores, "s1")
    first = RunningSummary("a said x\nb did y", (2,), through=6, updated_at="2026-01-01T00:00:00Z", model="m")
    assert stores.sessions.store_summary(T, "ag_1", "s1", first, was=None, reset_at=None)
    state = stores.sessions.state(T, "ag_1", "s1")
    assert state is not None and state.summary == first and state.summarised_through == 6
    # another job got there first: the summary it read is not the one stored
    second = RunningSummary("a said x\nb did y\nc found z", (2, 1), through=9, updated_at="2026-01-01T00:01:00Z", model="m")
    assert not stores.sessions.store_summary(T, "ag_1", "s1", second, was=None, reset_at=None)
    assert stores.sessions.store_summary(T, "ag_1", "s1", second, was=first, reset_at=None)
    assert not stores.sessions.store_summary(T, "ag_1", "s1", first, was=first, reset_at=None)
    # an Active Memory reset since the job read the session: refused; the reset drops the summary
    # and nothing cut before it is summarised again
    _session(stores, "s2", trimmed_count=14)
    stores.sessions.reset_context(T, "ag_1", "s2", wait_s=0)
    assert not stores.sessions.store_summary(T, "ag_1", "s2", first, was=None, reset_at=None)
    reset = stores.sessions.state(T, "ag_1", "s2")
    assert reset is not None and reset.summary is None and reset.summarised_through == 14 and reset.last_reset_at
    assert stores.sessions.store_summary(T, "ag_1", "s2", second, was=None, reset_at=reset.last_reset_at)


def test_reset_context_starts_after_the_current_messages(stores):
    _agent(stores)
    _session(stores, "s1", message_count=12, revision=4)
    stores.sessions.acquire_lease(T, "ag_1", "s1", "run_1", 60)
    with pytest.raises(SessionBusy):
        stores.sessions.reset_context(T, "ag_1", "s1", wait_s=0)
    stores.sessions.release_lease(T, "ag_1", "s1", "run_1")
    item = stores.sessions.reset_context(T, "ag_1", "s1", wait_s=0)
    assert (item["contextFrom"], item["revisionAtReset"], item["runsSinceReset"]) == (12, 4, 0)
    assert item["lastResetAt"] and "leaseOwner" not in item and "leaseUntil" not in item
    assert stores.sessions.get(T, "ag_1", "s1") == item
    with pytest.raises(NotFound):
        stores.sessions.reset_context(T, "ag_1", "missing", wait_s=0)


# --- runs -----------------------------------------------------------------------------------------
def test_runs_are_recorded_once_and_round_trip(stores):
    run = _run(
        "run_1",
        kind="heartbeat",
        prompt="check",
        session_id="dashboard",
        result={"card": {"action": "BUY", "score": 0.75}, "text": "ok"},
        usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.0125),
        tool_calls=[{"name": "search", "ms": 12}],
    )
    assert stores.runs.create(T, run) is True
    assert stores.runs.get(T, "run_1") == run
    assert stores.runs.create(T, run.model_copy(update={"prompt": "again"})) is False
    stores.runs.put(T, run.model_copy(update={"prompt": "ignored"}), only_if_new=True)
    assert stores.runs.get(T, "run_1") == run
    stores.runs.put(T, run.model_copy(update={"status": "failed", "error": {"code": "x", "message": "y"}}))
    got = stores.runs.get(T, "run_1")
    assert got is not None and (got.status, got.error) == ("failed", {"code": "x", "message": "y"})
    assert stores.runs.get(T2, "run_1") is None and stores.runs.get(T, "run_2") is None


def test_runs_page_per_agent_newest_first(stores):
    for i in range(5):
        stores.runs.create(T, _run(f"run_{i}"))
    stores.runs.create(T, _run("run_x", "ag_2"))
    stores.runs.create(T2, _run("run_y"))
    seen, pages = _all_pages(lambda **kw: stores.runs.page(T, "ag_1", **kw), 2)
    assert ([r.id for r in seen], pages) == ([f"run_{i}" for i in (4, 3, 2, 1, 0)], 3)
    assert [r.id for r in stores.runs.page(T2, "ag_1", limit=10, token=None)[0]] == ["run_y"]
    _, token = stores.runs.page(T, "ag_1", limit=2, token=None)
    with pytest.raises(BadRequest):
        stores.runs.page(T, "ag_2", limit=2, token=token)


def test_a_queued_run_is_claimed_by_one_worker(stores):
    stores.runs.create(T, _run("run_1"))
    claimed = stores.runs.start(T, "run_1", claim_s=60)
    assert claimed is not None and claimed.status == "running"
    assert stores.runs.start(T, "run_1", claim_s=60) is None  # another worker holds it
    stores.runs.requeue(T, "run_1")
    run = stores.runs.get(T, "run_1")
    assert run is not None and run.status == "queued"
    assert stores.runs.start(T, "run_1", claim_s=-10) is not None  # a claim that ran out at once...
    assert stores.runs.start(T, "run_1", claim_s=60) is not None  # ...is taken again
    stores.runs.put(T, _run("run_1", status="succeeded"))
    assert stores.runs.start(T, "run_1", claim_s=60) is None
    stores.runs.requeue(T, "run_1")  # finished: nothing to give back
    assert (stores.runs.get(T, "run_1") or _run("x")).status == "succeeded"
    assert stores.runs.start(T, "run_missing", claim_s=60) is None and stores.runs.get(T, "run_missing") is None
    assert stores.runs.start(T2, "run_1", claim_s=60) is None


def test_a_failure_is_recorded_on_an_unfinished_or_missing_run_only(stores):
    error = {"code": "firing_failed", "message": "boom"}
    failed = _run("run_1", status="failed", error=error)
    stores.runs.create(T, _run("run_1", prompt="queued"))
    stores.runs.start(T, "run_1", claim_s=60)
    assert stores.runs.fail_unfinished(T, failed) is True  # running: marked failed, its own fields kept
    got = stores.runs.get(T, "run_1")
    assert got is not None and (got.status, got.error, got.prompt) == ("failed", error, "queued")
    assert stores.runs.start(T, "run_1", claim_s=-10) is None  # no claim left to take over
    assert stores.runs.fail_unfinished(T, failed.model_copy(update={"error": {"code": "other"}})) is False
    unchanged = stores.runs.get(T, "run_1")
    assert unchanged is not None and unchanged.error == error  # finished: unchanged
    assert stores.runs.fail_unfinished(T, _run("run_2", status="failed", error=error)) is True  # missing: created
    assert stores.runs.get(T, "run_2") == _run("run_2", status="failed", error=error)
    stores.runs.put(T, _run("run_3", status="succeeded"))
    assert stores.runs.fail_unfinished(T, _run("run_3", status="failed", error=error)) is False
    assert (stores.runs.get(T, "run_3") or failed).status == "succeeded"
    assert stores.runs.get(T2, "run_1") is None


def test_resolution_and_the_latest_conviction_of_a_run(stores):
    stores.runs.create(T, _run("run_p", status="succeeded"))
    assert stores.run_decisions.set_resolution(T, "run_p", "resolved").resolution_status == "resolved"
    with pytest.raises(NotFound):
        stores.run_decisions.set_resolution(T, "run_missing", "resolved")
    assert stores.runs.get(T, "run_missing") is None
    stores.run_decisions.set_latest_conviction(T, "run_p", score=60, child_run_id="run_c2", child_created_at=ts(2))
    stores.run_decisions.set_latest_conviction(
        T, "run_p", score=10, child_run_id="run_c1", child_created_at=ts(1)
    )  # older: ignored
    assert (stores.runs.get(T, "run_p") or _run("x")).latest_conviction == 60
    stores.run_decisions.set_latest_conviction(T, "run_p", score=80, child_run_id="run_c3", child_created_at=ts(3))
    parent = stores.runs.get(T, "run_p")
    assert parent is not None and (parent.latest_conviction, parent.resolution_status) == (80, "resolved")
    stores.run_decisions.set_latest_conviction(T, "run_gone", score=1, child_run_id="run_c", child_created_at=ts(1))
    assert stores.runs.get(T, "run_gone") is None
    stores.runs.put(T, parent.model_copy(update={"prompt": "rewritten"}))  # a rewrite keeps them
    again = stores.runs.get(T, "run_p")
    assert again is not None and (again.latest_conviction, again.resolution_status) == (80, "resolved")


def test_reexaminations_are_listed_in_creation_order(stores):
    stores.runs.create(T, _run("run_p"))
    for i, rid in enumerate(["run_c", "run_a", "run_b"]):
        stores.runs.create(T, _run(rid, kind="reexamination", parent_run_id="run_p", created_at=ts(i)))
    stores.runs.create(T, _run("run_z", kind="reexamination", parent_run_id="run_q", created_at=ts(9)))
    stores.runs.create(T, _run("run_m", kind="manual", parent_run_id="run_p"))  # not a re-examination
    seen, pages = _all_pages(lambda **kw: stores.run_decisions.list_reexaminations(T, "run_p", **kw), 2)
    assert ([r.id for r in seen], pages) == (["run_c", "run_a", "run_b"], 2)
    assert stores.run_decisions.list_reexaminations(T2, "run_p", limit=10, token=None) == ([], None)


def test_recent_runs_with_cards_newest_first(stores):
    card = {"card": {"action": "BUY"}}
    for i in range(7):
        status = "succeeded" if i != 5 else "failed"
        stores.runs.create(T, _run(f"run_{i}", status=status, result=card if i % 2 else {"text": "no card"}))
    stores.runs.create(T, _run("run_9", "ag_2", status="succeeded", result=card))
    assert [r.id for r in stores.run_decisions.recent_with_cards(T, "ag_1", limit=10, page=2)] == ["run_3", "run_1"]
    assert [r.id for r in stores.run_decisions.recent_with_cards(T, "ag_1", limit=1, page=2)] == ["run_3"]
    assert [r.id for r in stores.run_decisions.recent_with_cards(T, "ag_1", limit=10, page=2, max_pages=1)] == []  # run_6, run_5
    assert stores.run_decisions.recent_with_cards(T2, "ag_1", limit=10) == []
    # Paged: each page reads at most page * max_pages runs; a short page's token still continues.
    seen, pages = _all_pages(lambda **kw: stores.run_decisions.with_cards_page(T, "ag_1", page=2, max_pages=1, **kw), 1)
    assert ([r.id for r in seen], pages) == (["run_3", "run_1"], 4)


def test_finish_turn_commits_run_usage_session_and_archive_together(stores):
    _agent(stores)
    _session(stores, "s1", message_count=2, revision=1)
    run = _run("run_1", session_id="s1")
    stores.runs.create(T, run)
    stores.sessions.acquire_lease(T, "ag_1", "s1", "run_1", 60)
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"message {i}"} for i in range(100)]
    archived = stores.archive.items_for_turn(T, "ag_1", "s1", "run_1", messages, ts(1))
    assert len(archived) == 100  # 87 fit the transaction next to the session, run and usage; 13 follow it
    done = run.model_copy(update={"status": "succeeded", "usage": Usage(cost_usd=0.5), "updated_at": ts(2)})
    stores.runs.finish_turn(
        T,
        run=done,
        usage_rows=[_usage("u1", ts(2))],
        session_changes={"messageCount": 4, "revision": 2},
        extra_items=archived,
    )
    assert stores.runs.get(T, "run_1") == done
    session = stores.sessions.get(T, "ag_1", "s1") or {}
    assert (session["messageCount"], session["revision"], session["updatedAt"]) == (4, 2, ts(2))
    assert "leaseOwner" not in session and "leaseUntil" not in session
    assert [r.id for r in stores.usage.page(T, agent_id=None, session_key=None, limit=10, token=None)[0]] == ["u1"]
    assert [i["text"] for i in stores.archive.session_items(T, "ag_1", "s1")] == [f"message {i}" for i in range(100)]


def test_finish_turn_without_the_lease_or_twice_writes_nothing(stores):
    _agent(stores)
    _session(stores, "s1")
    run = _run("run_1", session_id="s1")
    stores.runs.create(T, run)
    done = run.model_copy(update={"status": "succeeded"})
    extra = stores.archive.items_for_turn(T, "ag_1", "s1", "run_1", [{"role": "user", "content": "hi"}], ts(1))
    with pytest.raises(SessionBusy):  # the lease is not held by this run
        stores.runs.finish_turn(T, run=done, usage_rows=[_usage("u1", ts(2))], session_changes={"revision": 1}, extra_items=extra)
    assert (stores.runs.get(T, "run_1") or done).status == "queued"
    assert stores.usage.all_rows(T) == [] and stores.archive.session_items(T, "ag_1", "s1") == []
    assert (stores.sessions.get(T, "ag_1", "s1") or {})["revision"] == 0

    clean = _run("run_2", kind="manual", status="succeeded")  # no session: its status guards it
    stores.runs.finish_turn(T, run=clean, usage_rows=[_usage("u2", ts(3))], session_changes=None)
    with pytest.raises(Conflict) as err:
        stores.runs.finish_turn(T, run=clean, usage_rows=[_usage("u3", ts(4))], session_changes=None)
    assert err.value.code == "run_finished"
    assert [r["id"] for r in stores.usage.all_rows(T)] == ["u2"]


def test_runs_delete_all_removes_only_the_tenants_run_rows(stores):
    _agent(stores)
    for i in range(30):
        stores.runs.create(T, _run(f"run_{i:02d}"))
    stores.runs.create(T2, _run("run_00"))
    assert stores.runs.delete_all(T) == 30
    assert stores.runs.page(T, "ag_1", limit=50, token=None) == ([], None)
    assert stores.agents.get(T, "ag_1") is not None and stores.runs.get(T2, "run_00") is not None
    assert stores.runs.delete_all(T) == 0


# --- usage ----------------------------------------------------------------------------------------
def test_usage_pages_by_tenant_agent_and_session(stores):
    rows = [
        _usage("u1", ts(1)),
        _usage("u2", ts(2), session_key="memory-extract:dashboard"),
        _usage("u3", ts(3)),
        _usage("u4", ts(4), agent_id="ag_2"),
        _usage("u5", ts(5), session_key="s1", cost=0.125),
    ]
    for row in rows:
        stores.usage.put(T, row)
    stores.usage.put(T2, _usage("u9", ts(9)))
    newest, pages = _all_pages(lambda **kw: stores.usage.page(T, agent_id=None, session_key=None, **kw), 2)
    assert ([r.id for r in newest], pages) == (["u5", "u4", "u3", "u2", "u1"], 3)
    assert newest[0] == rows[4]
    agent_rows, _ = _all_pages(lambda **kw: stores.usage.page(T, agent_id="ag_1", session_key=None, **kw), 3)
    assert [r.id for r in agent_rows] == ["u5", "u2", "u3", "u1"]  # by session key, then time, newest first
    session_rows, _ = _all_pages(lambda **kw: stores.usage.page(T, agent_id="ag_1", session_key="dashboard", **kw), 1)
    assert [r.id for r in session_rows] == ["u1", "u3"]  # one session, oldest first
    _, token = stores.usage.page(T, agent_id=None, session_key=None, limit=1, token=None)
    with pytest.raises(BadRequest):
        stores.usage.page(T2, agent_id=None, session_key=None, limit=1, token=token)


def test_usage_export_and_delete_all(stores):
    for i in range(30):
        stores.usage.put(T, _usage(f"u{i:02d}", ts(i % 60, i // 60)))
    stores.usage.put(T2, _usage("u99", ts(1)))
    exported = stores.usage.all_rows(T)
    assert [r["id"] for r in exported] == [f"u{i:02d}" for i in range(30)]
    assert exported[0] == _usage("u00", ts(0)).model_dump(by_alias=True)
    assert stores.usage.delete_all(T) == 30
    assert stores.usage.all_rows(T) == [] and [r["id"] for r in stores.usage.all_rows(T2)] == ["u99"]


# --- card types -----------------------------------------------------------------------------------
def _card_type(name: str, **fields: Any) -> CardType:
    return CardType(
        id=name,
        name=name,
        fields=fields.pop(
            "fields",
            {"action": {"type": "enum", "enum": ["BUY", "SELL"], "required": True}, "score": {"type": "number", "min": 0.5}},
        ),
        created_at=NOW,
        updated_at=NOW,
        **fields,
    )


def test_card_types_round_trip_and_delete_all(stores):
    verdict = _card_type("verdict", re_examinable="until_resolved", re_examine_actions=["BUY"], summary_fields=["action"])
    stores.card_types.put(T, verdict)
    assert stores.card_types.get(T, "verdict") == verdict
    replaced = _card_type("verdict", description="v2", fields={"note": {"type": "string", "max_length": 40}})
    stores.card_types.put(T, replaced)
    assert stores.card_types.get(T, "verdict") == replaced
    for name in ("alpha", "beta", "gamma", "delta"):
        stores.card_types.put(T, _card_type(name))
    stores.card_types.put(T2, _card_type("theirs"))
    _agent(stores)
    assert [c.name for c in stores.card_types.all(T)] == ["alpha", "beta", "delta", "gamma", "verdict"]
    assert stores.card_types.get(T2, "verdict") is None and stores.card_types.get(T, "missing") is None
    assert stores.card_types.delete_all(T) == 5
    assert stores.card_types.all(T) == [] and stores.agents.get(T, "ag_1") is not None
    assert [c.name for c in stores.card_types.all(T2)] == ["theirs"]


# --- memories -------------------------------------------------------------------------------------
def test_memories_round_trip_in_each_scope_and_conditional_puts(stores):
    ws = _memory("m_w", topic="rates", origin={"runId": "run_1", "sessionId": "s1"}, importance=40, pinned=True)
    agent = _memory("m_a", scope="agent", category="daily", expires_at=FAR_FUTURE)
    stores.memories.put(T, ws, "ws_1")
    stores.memories.put(T, agent, "ag_1")
    assert stores.memories.get(T, "workspace", "ws_1", "m_w") == ws
    assert stores.memories.get(T, "agent", "ag_1", "m_a") == agent
    assert stores.memories.get(T, "agent", "ws_1", "m_w") is None and stores.memories.get(T2, "workspace", "ws_1", "m_w") is None
    changed = ws.model_copy(update={"value": "new", "updated_at": ts(1)})
    stores.memories.put(T, changed, "ws_1", expect_updated_at=NOW)
    with pytest.raises(Conflict) as err:  # read before the change above: refused
        stores.memories.put(T, ws.model_copy(update={"value": "stale"}), "ws_1", expect_updated_at=NOW)
    assert err.value.code == "memory_changed"
    with pytest.raises(Conflict):  # a row that is not there has no updatedAt to match
        stores.memories.put(T, _memory("m_new"), "ws_1", expect_updated_at=NOW)
    assert stores.memories.get(T, "workspace", "ws_1", "m_w") == changed
    assert stores.memories.get(T, "workspace", "ws_1", "m_new") is None


def test_memories_get_many_all_delete_and_delete_owner(stores):
    for i in range(3):
        stores.memories.put(T, _memory(f"m_{i}"), "ws_1")
    stores.memories.put(T, _memory("m_x", archived_at=ts(1), archived_reason="superseded"), "ws_1")
    stores.memories.put(T, _memory("m_a", scope="agent"), "ag_1")
    found = stores.memories.get_many(
        T,
        [
            ("workspace", "ws_1", "m_0"),
            ("workspace", "ws_1", "m_0"),
            ("workspace", "ws_1", "m_x"),
            ("agent", "ag_1", "m_a"),
            ("workspace", "ws_1", "m_missing"),
        ],
    )
    assert sorted(found) == ["m_0", "m_a", "m_x"] and found["m_x"].archived_at == ts(1)
    assert stores.memories.get_many(T2, [("workspace", "ws_1", "m_0")]) == {}
    assert [m.id for m in stores.memories.all(T, "workspace", "ws_1")] == ["m_0", "m_1", "m_2", "m_x"]
    stores.memories.delete(T, "workspace", "ws_1", "m_1")
    with pytest.raises(NotFound):
        stores.memories.delete(T, "workspace", "ws_1", "m_1")
    with pytest.raises(NotFound):
        stores.memories.delete(T2, "workspace", "ws_1", "m_0")
    assert stores.memories.delete_owner(T, "workspace", "ws_1") == 3
    assert stores.memories.all(T, "workspace", "ws_1") == [] and [m.id for m in stores.memories.all(T, "agent", "ag_1")] == [
        "m_a"
    ]


def test_top_memories_in_injection_order(stores):
    rows = [
        _memory("m_old", importance=50, updated_at=ts(1)),
        _memory("m_new", importance=50, updated_at=ts(2)),
        _memory("m_pin", pinned=True, importance=0, updated_at=ts(0)),
        _memory("m_high", importance=90, updated_at=ts(0)),
        _memory("m_low", importance=10, updated_at=ts(9)),
        _memory("m_arch", importance=100, archived_at=ts(3)),
        _memory("m_exp", importance=100, category="daily", expires_at=1),
        _memory("m_conv1", importance=70, category="conversation", session_id="s1"),
        _memory("m_conv2", importance=70, category="conversation", session_id="s2"),
    ]
    for m in rows:
        stores.memories.put(T, m, "ws_1")
    order = [m.id for m in stores.memories.top(T, "workspace", "ws_1", limit=10, session_id="s1")]
    assert order == ["m_pin", "m_high", "m_conv1", "m_new", "m_old", "m_low"]
    assert [m.id for m in stores.memories.top(T, "workspace", "ws_1", limit=3, session_id=None)] == [
        "m_pin",
        "m_high",
        "m_new",
    ]
    assert stores.memories.top(T, "workspace", "ws_1", limit=0, session_id=None) == []
    assert stores.memories.top(T2, "workspace", "ws_1", limit=10, session_id=None) == []
    # an update that pins a row moves it in the index; archiving takes it out
    stores.memories.put(T, rows[4].model_copy(update={"pinned": True, "updated_at": ts(10)}), "ws_1")
    stores.memories.put(T, rows[2].model_copy(update={"archived_at": ts(11)}), "ws_1")
    assert [m.id for m in stores.extraction.live_rows(T, "workspace", "ws_1", limit=3, session_id="s2")] == [
        "m_low",
        "m_high",
        "m_conv2",
    ]


def test_top_memories_read_as_many_pages_as_asked_and_more_past_skipped_rows(stores):
    """With `wanted`, the read goes on while it asks for rows; rows skipped (another session's
    conversation rows, ranked first here) make the next page larger in proportion (a whole page
    while none was kept), so the live rows behind 300 skipped ones are still found."""
    for i in range(300):
        stores.memories.put(T, _memory(f"m_s{i:03d}", importance=90, category="conversation", session_id="s2"), "ws_1")
    for i in range(300):
        stores.memories.put(T, _memory(f"m_k{i:03d}", importance=10, updated_at=ts(i // 60, i % 60)), "ws_1")
    asked: list[int] = []

    def wanted(rows: list[object]) -> int:
        asked.append(len(rows))
        return 5 if len(rows) < 12 else 0

    found = stores.memories.top_entries(T, "workspace", "ws_1", limit=200, session_id="s1", page=50, wanted=wanted)
    assert asked == [0, 0, len(found)] and 12 <= len(found) < 200  # 50 and 200 skipped, then enough
    everything = stores.memories.top(T, "workspace", "ws_1", limit=200, session_id="s1")
    assert [m.key for m in found] == [m.key for m in everything[: len(found)]] and found[0].key == "key-m_k299"


def test_the_sections_rows_are_tops_with_only_what_is_shown_and_a_second_read_takes_one_query(stores, monkeypatch):
    """`top_entries` reads the rows `top` reads (the same skips) with only a MemoryEntry's
    attributes; an owner read page by page before is read in as many rows as that read took, in
    one Query, with the same pages asked of `wanted` and the same rows."""
    for i in range(40):
        stores.memories.put(T, _memory(f"m_s{i:03d}", importance=90, category="conversation", session_id="s2"), "ws_1")
    for i in range(160):
        stores.memories.put(T, _memory(f"m_k{i:03d}", importance=i % 50, pinned=i % 40 == 0, source="auto"), "ws_1")
    stores.memories.put(T, _memory("m_gone", importance=99, category="daily", expires_at=1), "ws_1")
    from engram.memory import repository

    queries: list[int] = []
    read = repository.query_after

    def counted(*args: Any, **kw: Any) -> Any:
        queries.append(kw["limit"])
        return read(*args, **kw)

    monkeypatch.setattr(repository, "query_after", counted)
    asked: list[list[int]] = [[], []]

    def wanted(n: int) -> Any:
        return lambda rows: asked[n].append(len(rows)) or (30 if len(rows) < 70 else 0)

    reads = []
    for n in range(2):
        reads.append(stores.memories.top_entries(T, "workspace", "ws_1", limit=200, session_id="s1", page=20, wanted=wanted(n)))
        reads.append(len(queries))
        queries.clear()
    first, pages, again, queried = reads
    assert first == again and asked[0] == asked[1] and 70 <= len(first) < 160
    assert pages > 1 and queried == 1  # the read before took several pages; this one asks for as many rows at once
    full = stores.memories.top(T, "workspace", "ws_1", limit=len(first), session_id="s1")
    assert [(m.key, m.value, m.pinned, m.source) for m in full] == [(e.key, e.value, e.pinned, e.source) for e in first]
    shown = {"key", "value", "source", "category", "pinned", "session_id", "archived_at", "expires_at"}
    assert set(type(first[0]).model_fields) == shown  # what a section shows and needs to tell live rows


def test_director_learnings_are_indexed_apart(stores):
    for i in range(4):
        m = _memory(f"m_l{i}", scope="agent", source="director", key=f"director:learning:{i}", created_at=ts(i), updated_at=ts(i))
        stores.memories.put(T, m, "ag_1")
    stores.memories.put(
        T,
        _memory("m_l9", scope="agent", source="director", key="director:learning:9", created_at=ts(9), archived_at=ts(9)),
        "ag_1",
    )
    stores.memories.put(T, _memory("m_plain", scope="agent", importance=5), "ag_1")
    assert [m.id for m in stores.memories.recent_learnings(T, "ag_1", limit=3)] == ["m_l3", "m_l2", "m_l1"]
    assert (
        stores.memories.recent_learnings(T, "ag_1", limit=0) == [] and stores.memories.recent_learnings(T2, "ag_1", limit=3) == []
    )
    assert [m.id for m in stores.memories.top(T, "agent", "ag_1", limit=10, session_id=None)] == ["m_plain"]


def test_delete_session_memories_takes_only_that_sessions_conversation_rows(stores):
    for i in range(30):
        stores.memories.put(T, _memory(f"m_c{i:02d}", scope="agent", category="conversation", session_id="s1"), "ag_1")
    stores.memories.put(T, _memory("m_c_other", scope="agent", category="conversation", session_id="s2"), "ag_1")
    stores.memories.put(T, _memory("m_core", scope="agent", session_id="s1"), "ag_1")
    assert stores.memories.delete_session_memories(T, "ag_1", "s1") == 30
    assert [m.id for m in stores.memories.all(T, "agent", "ag_1")] == ["m_c_other", "m_core"]
    assert stores.memories.delete_session_memories(T2, "ag_1", "s2") == 0


# --- facts ----------------------------------------------------------------------------------------
def test_facts_round_trip_and_conditional_puts(stores):
    fact = _fact("f_1", topic="work", confidence="asserted", origin={"runId": "run_1"})
    stores.facts.put(T, fact)
    assert stores.facts.get(T, "f_1") == fact and stores.facts.get(T2, "f_1") is None
    edited = fact.model_copy(update={"fact": "edited", "updated_at": ts(5, 1)})
    stores.facts.put(T, edited, expect_updated_at=NOW)
    with pytest.raises(Conflict) as err:
        stores.facts.put(T, fact.model_copy(update={"fact": "stale"}), expect_updated_at=NOW)
    assert err.value.code == "fact_changed"
    assert stores.facts.get(T, "f_1") == edited


def test_top_facts_by_latest_reference_and_bump(stores):
    facts = [_fact(f"f_{i}", created_at=ts(i)) for i in range(4)]
    for f in facts:
        stores.facts.put(T, f)
    archived = _fact("f_arch", created_at=ts(9), archived_at=ts(9))
    stores.facts.put(T, archived)
    stores.facts.put(T2, _fact("f_9", created_at=ts(9)))
    assert [f.id for f in stores.facts.top(T, 10)] == ["f_3", "f_2", "f_1", "f_0"]
    assert [f.id for f in stores.facts.top(T, 2)] == ["f_3", "f_2"] and stores.facts.top(T, 0) == []
    stores.facts.bump(T, [facts[0], facts[1]], ts(30))
    assert [f.id for f in stores.facts.top(T, 10)] == ["f_0", "f_1", "f_3", "f_2"]  # same instant: by id
    bumped = stores.facts.get(T, "f_0")
    assert bumped is not None and bumped.last_referenced_at == ts(30) and bumped.fact == facts[0].fact
    stores.facts.bump(T, [facts[2], archived], ts(40))  # one was archived: the whole bump is skipped
    unbumped = stores.facts.get(T, "f_2")
    assert unbumped is not None and unbumped.last_referenced_at is None
    assert stores.facts.get(T, "f_arch") == archived
    stores.facts.bump(T, [], ts(50))
    assert [f.id for f in stores.facts.all(T)] == ["f_0", "f_1", "f_2", "f_3", "f_arch"]


def test_facts_delete_all(stores):
    for i in range(27):
        stores.facts.put(T, _fact(f"f_{i:02d}"))
    stores.facts.create(T, _fact("f_new", fact="I like tea"), limit=100)
    stores.facts.put(T2, _fact("f_x"))
    assert stores.facts.delete_all(T) == 28  # facts only; their text rows go too
    assert stores.facts.all(T) == [] and stores.facts.top(T, 10) == []
    assert stores.facts.by_text(T, "I like tea") == (None, None, False)
    assert [f.id for f in stores.facts.all(T2)] == ["f_x"]


def test_fact_texts_are_claimed_once(stores):
    from engram.facts.ports import DuplicateText

    assert stores.facts.by_text(T, "I like tea") == (None, None, False)
    stores.facts.put(T, _fact("f_old", fact="I like  TEA!"))  # stored before the text rows existed
    stores.facts.put(T, _fact("f_gone", fact="I like coffee", archived_at=NOW))
    stores.facts.index_texts(T)
    old = stores.facts.get(T, "f_old")
    assert stores.facts.by_text(T, "i like tea") == (old, "f_old", True)
    assert stores.facts.by_text(T, "I like coffee") == (None, None, True)  # archived: not indexed
    with pytest.raises(DuplicateText):
        stores.facts.create(T, _fact("f_2", fact="I like tea"), limit=100)  # f_old holds the text
    stores.facts.create(T, _fact("f_2", fact="I like tea"), limit=100, replacing="f_old")  # the caller saw f_old stale
    assert stores.facts.by_text(T, "I like tea")[1] == "f_2"
    with pytest.raises(DuplicateText):
        stores.facts.create(T, _fact("f_3", fact="I like tea"), limit=100, replacing="f_old")  # no longer the holder
    assert stores.facts.get(T, "f_3") is None  # nothing half-written
    assert stores.facts.by_text(T2, "I like tea") == (None, None, False)  # per tenant
    edited = _fact("f_2").model_copy(update={"fact": "I like green tea", "updated_at": ts(9)})
    stores.facts.put_reindexed(T, edited, expect_updated_at=NOW, was_active=True, limit=100)
    assert stores.facts.by_text(T, "I like green tea") == (edited, "f_2", True)
    with pytest.raises(Conflict):
        stores.facts.put_reindexed(
            T, edited.model_copy(update={"fact": "stale"}), expect_updated_at=NOW, was_active=True, limit=100
        )
    assert [f.id for f in stores.facts.all(T)] == ["f_2", "f_gone", "f_old"]  # the text rows are not facts


# --- the conversation archive ---------------------------------------------------------------------
def _turn(
    stores: Stores, session_id: str, run_id: str, at: str, *contents: Any, agent_id: str = "ag_1", t: str = T
) -> list[dict[str, Any]]:
    """Archives one turn: its messages alternate user and assistant, each with the content given."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": content} for i, content in enumerate(contents)]
    items = stores.archive.items_for_turn(t, agent_id, session_id, run_id, messages, at)
    assert stores.archive.put_many(t, agent_id, items) == len(items)
    return items


def test_archive_reads_by_session_and_since_a_time(stores):
    _turn(stores, "s1", "run_1", ts(1), "hello", "hi there")
    _turn(stores, "s2", "run_2", ts(2), "other session")
    _turn(stores, "s1", "run_3", ts(3), "again", [{"type": "text", "text": "answer"}, {"type": "tool_use", "name": "search"}])
    _turn(stores, "s1", "run_9", ts(9), "theirs", agent_id="ag_2")
    _turn(stores, "s1", "run_8", ts(8), "other tenant", t=T2)
    assert [i["text"] for i in stores.archive.session_items(T, "ag_1", "s1")] == ["hello", "hi there", "again", "answer"]
    assert stores.archive.session_items(T, "ag_1", "s1")[-1]["tools"] == ["search"]
    assert [i["text"] for i in stores.archive.load_since(T, "ag_1", None)] == [
        "hello",
        "hi there",
        "other session",
        "again",
        "answer",
    ]
    assert [i["text"] for i in stores.archive.load_since(T, "ag_1", ts(2))] == ["other session", "again", "answer"]
    assert [i["text"] for i in stores.archive.load_since(T, "ag_1", ts(2, 1))] == []
    assert [i["text"] for i in stores.archive.load_since(T, "ag_1", None, limit=3)] == ["other session", "again", "answer"]
    assert [i["text"] for i in stores.archive.load_since(T2, "ag_1", None)] == ["other tenant"]
    assert stores.archive.name == stores.table.name
    with pytest.raises(ValueError):  # only this agent's archive items
        stores.archive.put_many(
            T, "ag_2", stores.archive.items_for_turn(T, "ag_1", "s1", "run_1", [{"role": "user", "content": "x"}], ts(1))
        )


def test_deleting_a_sessions_archive_leaves_a_tombstone(stores):
    for i in range(15):
        _turn(stores, "s1", f"run_{i:02d}", ts(i), f"question {i}", f"answer {i}")
    _turn(stores, "s2", "run_x", ts(20), "kept")
    assert stores.archive.delete_session(T, "ag_1", "s1") == 30
    assert stores.archive.session_items(T, "ag_1", "s1") == []
    assert [i["text"] for i in stores.archive.session_items(T, "ag_1", "s2")] == ["kept"]
    since = stores.archive.load_since(T, "ag_1", None)  # the tombstone is stamped with the clock's now
    assert sorted((i["kind"], i["sessionId"]) for i in since) == [("msg", "s2"), ("session_deleted", "s1")]
    tombstone = next(i for i in since if i["kind"] == "session_deleted")
    assert tombstone["SK"].startswith("ARCHDEL#s1#") and tombstone["expiresAt"] > 0
    assert stores.archive.delete_session(T, "ag_1", "s1") == 0


# --- run memory -----------------------------------------------------------------------------------
def _entry(key: str, value: Any, created_at: str, **fields: Any) -> RunMemoryEntry:
    kind = {"input": "input", "step": "step_result", "task": "task_result", "shared": "shared"}[key.split(":")[0]]
    return RunMemoryEntry(
        key=key,
        kind=kind,
        value=value,
        created_at=created_at,
        updated_at=fields.pop("updated_at", created_at),
        value_bytes=len(str(value)),
        **fields,
    )


def test_run_memory_put_keeps_the_first_created_at_and_replaces_the_rest(stores):
    nested = {"list": [1, 2.5, None, True, "x"], "empty": {}, "blank": "", "float": 0.1}
    first = stores.run_memory.put(T, "ag_1", "run_1", _entry("task:a", nested, ts(1), source="ag_2", title="T", description="d"))
    assert first == _entry("task:a", nested, ts(1), source="ag_2", title="T", description="d")
    second = stores.run_memory.put(T, "ag_1", "run_1", _entry("task:a", [1], ts(5), updated_at=ts(6)))
    assert second == _entry("task:a", [1], ts(1), updated_at=ts(6))  # source, title, description removed
    assert stores.run_memory.load(T, "ag_1", "run_1") == [second]
    assert stores.run_memory.load(T2, "ag_1", "run_1") == [] and stores.run_memory.load(T, "ag_1", "run_2") == []


def test_run_memory_put_many_load_in_created_order_and_agent_entries(stores):
    entries = [_entry(f"input:k{i:02d}", {"i": i}, ts(59 - i)) for i in range(30)]
    stores.run_memory.put_many(T, "ag_1", "run_1", entries)
    stores.run_memory.put(T, "ag_1", "run_2", _entry("shared:x", "y", ts(0)))
    stores.run_memory.put(T, "ag_2", "run_1", _entry("shared:z", "z", ts(0)))
    assert stores.run_memory.load(T, "ag_1", "run_1") == sorted(entries, key=lambda e: e.created_at)
    pairs = stores.run_memory.agent_entries(T, "ag_1")
    assert sorted((run, e.key) for run, e in pairs) == sorted([("run_1", e.key) for e in entries] + [("run_2", "shared:x")])
    assert stores.run_memory.agent_entries(T2, "ag_1") == []
    seen, pages = _all_pages(lambda **kw: stores.run_memory.page(T, "ag_1", "run_1", max_bytes=10**6, **kw), 7)
    assert ([e.key for e in seen], pages) == ([e.key for e in entries], 5)  # key order
    # A page also stops at max_bytes of values (each entry here holds 8 or 9: two a page); at least one entry.
    seen, pages = _all_pages(lambda **kw: stores.run_memory.page(T, "ag_1", "run_1", max_bytes=20, **kw), 7)
    assert ([e.key for e in seen], pages) == ([e.key for e in entries], 15)
    assert len(stores.run_memory.page(T, "ag_1", "run_1", limit=5, token=None, max_bytes=1)[0]) == 1


# --- extraction claims ----------------------------------------------------------------------------
def test_an_extraction_is_claimed_by_one_attempt_and_committed_once(stores):
    claim = stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_1", lease_s=60)
    assert (claim.attempt_id, claim.attempt) == ("att_1", 1)
    with pytest.raises(ExtractionBusy):
        stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_2", lease_s=60)
    stores.extraction.release(T, "ag_1", "run_1", Claim(attempt_id="att_other", attempt=1))  # not ours: no-op
    with pytest.raises(ExtractionBusy):
        stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_2", lease_s=60)
    stores.extraction.release(T, "ag_1", "run_1", claim)
    second = stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_2", lease_s=60)
    assert (second.attempt_id, second.attempt) == ("att_2", 2)
    row = RowWrite(memory=_memory("m_auto", source="auto"), owner_id="ws_1", expect_updated_at=None)
    stores.extraction.commit(
        T,
        "ag_1",
        "run_1",
        second,
        outcome={"stored": 1, "scores": [0.5]},
        usage=_usage("u1", ts(1)),
        rows=[row],
        memory_limit=100,
    )
    assert stores.memories.get(T, "workspace", "ws_1", "m_auto") == row.memory
    assert [r["id"] for r in stores.usage.all_rows(T)] == ["u1"]
    with pytest.raises(AlreadyExtracted) as err:
        stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_3", lease_s=60)
    assert err.value.marker["status"] == "done" and err.value.marker["outcome"] == {"stored": 1, "scores": [0.5]}
    assert stores.extraction.claim(T2, "ag_1", "run_1", attempt_id="att_4", lease_s=60).attempt == 1  # another tenant


def test_an_extraction_whose_lease_was_taken_over_commits_nothing(stores):
    first = stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_1", lease_s=-10)  # its lease ran out
    second = stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_2", lease_s=60)
    assert second.attempt == 2
    row = RowWrite(memory=_memory("m_auto"), owner_id="ws_1", expect_updated_at=None)
    with pytest.raises(LeaseLost):
        stores.extraction.commit(T, "ag_1", "run_1", first, outcome={}, usage=_usage("u1", ts(1)), rows=[row], memory_limit=100)
    assert stores.memories.get(T, "workspace", "ws_1", "m_auto") is None and stores.usage.all_rows(T) == []
    stores.extraction.put_usage(T, _usage("u1", ts(1)))  # the cost is still recorded, alone
    assert [r["id"] for r in stores.usage.all_rows(T)] == ["u1"]


def test_an_extraction_over_changed_rows_commits_nothing(stores):
    stores.memories.put(T, _memory("m_old", updated_at=ts(1)), "ws_1")
    stores.memories.put(T, _memory("m_taken"), "ws_1")
    read = stores.extraction.get_rows(T, [("workspace", "ws_1", "m_old"), ("workspace", "ws_1", "m_gone")])
    assert list(read) == ["m_old"] and stores.extraction.get_rows(T, []) == {}
    claim = stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_1", lease_s=60)
    supersede = RowWrite(
        memory=read["m_old"].model_copy(update={"archived_at": ts(2), "updated_at": ts(2)}),
        owner_id="ws_1",
        expect_updated_at=ts(1),
    )
    stores.memories.put(T, read["m_old"].model_copy(update={"value": "edited", "updated_at": ts(3)}), "ws_1")  # meanwhile
    with pytest.raises(RowsChanged):
        stores.extraction.commit(T, "ag_1", "run_1", claim, outcome={}, usage=None, rows=[supersede], memory_limit=100)
    clash = RowWrite(memory=_memory("m_taken", value="mine"), owner_id="ws_1", expect_updated_at=None)
    with pytest.raises(RowsChanged):
        stores.extraction.commit(T, "ag_1", "run_1", claim, outcome={}, usage=None, rows=[clash], memory_limit=100)
    assert (stores.memories.get(T, "workspace", "ws_1", "m_old") or read["m_old"]).value == "edited"
    assert (stores.memories.get(T, "workspace", "ws_1", "m_taken") or read["m_old"]).value == "value of m_taken"
    # the marker is still this attempt's: a commit that fits goes through
    stores.extraction.commit(T, "ag_1", "run_1", claim, outcome={"stored": 0}, usage=None, rows=[], memory_limit=100)
    with pytest.raises(AlreadyExtracted):
        stores.extraction.claim(T, "ag_1", "run_1", attempt_id="att_2", lease_s=60)
