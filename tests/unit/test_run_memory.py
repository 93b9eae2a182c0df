"""RunScratchpad (RM1) against an in-memory store: namespaces and kinds, createdAt kept on overwrite,
filters, the memory_list cap, size and entry limits, and concurrent writers."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from engram.engine.tools import ToolContext, ToolRegistry
from engram.kernel.errors import BadRequest, Conflict, PayloadTooLarge, QuotaExceeded
from engram.kernel.settings import Settings
from engram.run_memory.models import RunMemoryEntry
from engram.run_memory.store import RUN_MEMORY, RunScratchpad, input_key, shared_key, task_key
from engram.run_memory.tools import _learning_intent, _read_intent, register_tools


class FakeStore:
    """The RunMemoryRepository contract in memory: put keeps the first createdAt, put_many writes as given."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str], RunMemoryEntry] = {}
        self.puts = 0
        self.batches = 0

    def put(self, t, agent_id, run_id, entry):
        self.puts += 1
        old = self.rows.get((t, agent_id, run_id, entry.key))
        stored = entry.model_copy(update={"created_at": old.created_at}) if old else entry
        self.rows[(t, agent_id, run_id, entry.key)] = stored
        return stored

    def put_many(self, t, agent_id, run_id, entries):
        self.batches += 1
        for e in entries:
            self.rows[(t, agent_id, run_id, e.key)] = e

    def load(self, t, agent_id, run_id):
        found = [e for (tt, a, r, _), e in self.rows.items() if (tt, a, r) == (t, agent_id, run_id)]
        return sorted(found, key=lambda e: e.created_at)


def settings(**kw) -> Settings:
    return Settings.model_validate(kw)


@pytest.fixture
def store():
    return FakeStore()


@pytest.fixture
def rm(store):
    return RunScratchpad(store, "t1", "ag_lead", "run_1", settings())


def test_key_helpers_validate():
    assert (task_key("ag_1"), input_key("topic"), shared_key("plan")) == ("task:ag_1", "input:topic", "shared:plan")
    for bad in ("", "has space", "x" * 121, "sl/ash"):
        with pytest.raises(BadRequest):
            shared_key(bad)


def test_namespaces_decide_the_kind(rm):
    rm.set("input:topic", "input", "rates")
    rm.set("step:s1", "step_result", {"ok": True})
    rm.set("task:ag_1", "task_result", [1, 2])
    rm.set("shared:plan", "shared", "go")
    assert [e.kind for e in rm.list()] == ["input", "step_result", "task_result", "shared"]
    for key, kind in [("task:x", "shared"), ("shared:x", "task_result"), ("input:x", "step_result"), ("step:x", "input")]:
        with pytest.raises(BadRequest):
            rm.set(key, kind, 1)
    for key in ("other:x", "shared:", "task", "shared:a b", 7):
        with pytest.raises(BadRequest):
            rm.set(key, "shared", 1)  # type: ignore[arg-type]
    assert len(rm) == 4


def test_overwrite_keeps_created_at_and_replaces_the_rest(rm, store):
    first = rm.set("task:ag_1", "task_result", {"v": 1}, source="ag_1", title="Analyst", description="first")
    second = rm.set("task:ag_1", "task_result", {"v": 2}, source="ag_1")
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert second.value == {"v": 2} and second.title is None and second.description is None
    assert rm.get("task:ag_1") == second == store.rows[("t1", "ag_lead", "run_1", "task:ag_1")]
    assert store.puts == 2


def test_values_round_trip_as_json_and_report_their_size(rm):
    value = {"nested": [1, 2.5, None, {"ü": "ñ", "empty": {}}], "b": True, "s": ""}
    entry = rm.set("shared:v", "shared", value)
    assert entry.value == value
    assert entry.value_bytes == len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    tup = rm.set("shared:t", "shared", (1, 2))
    assert tup.value == [1, 2]  # what the persisted run gives back
    public = entry.public()
    assert public["valueBytes"] == entry.value_bytes and "createdAt" in public and public["value"] == value
    assert "value" not in entry.meta() and entry.meta()["key"] == "shared:v"
    for bad in ({1, 2}, float("nan"), object()):
        with pytest.raises(BadRequest):
            rm.set("shared:bad", "shared", bad)


def test_value_size_limit(store):
    rm = RunScratchpad(store, "t1", "ag", "run_1", settings(RUN_MEMORY_VALUE_MAX_BYTES=1024))
    rm.set("shared:ok", "shared", "x" * 1000)
    with pytest.raises(PayloadTooLarge) as err:
        rm.set("shared:big", "shared", "x" * 1100)
    assert "1024" in err.value.message
    assert rm.get("shared:big") is None and ("t1", "ag", "run_1", "shared:big") not in store.rows


def test_entry_limit_allows_overwrites(store):
    rm = RunScratchpad(store, "t1", "ag", "run_1", settings(RUN_MEMORY_MAX_ENTRIES=10))
    for i in range(10):
        rm.set(f"shared:k{i}", "shared", i)
    with pytest.raises(Conflict) as err:
        rm.set("shared:k10", "shared", 10)
    assert err.value.code == "run_memory_full" and err.value.status == 409
    rm.set("shared:k3", "shared", "again")  # an existing key is not a new entry
    with pytest.raises(Conflict):
        rm.seed_inputs({"a": 1})
    assert len(rm) == 10


def test_list_filters(rm):
    rm.seed_inputs({"topic": "rates", "skip": None})
    rm.set("task:ag_1", "task_result", 1, source="ag_1")
    rm.set("task:ag_2", "task_result", 2, source="ag_2")
    rm.set("shared:note", "shared", 3, source="ag_1")
    keys = lambda entries: [e.key for e in entries]  # noqa: E731
    assert keys(rm.list()) == ["input:topic", "task:ag_1", "task:ag_2", "shared:note"]
    assert keys(rm.list(kind="task_result")) == ["task:ag_1", "task:ag_2"]
    assert keys(rm.list(kind=["input", "shared"])) == ["input:topic", "shared:note"]
    assert keys(rm.list(key_prefix="task:ag_2")) == ["task:ag_2"]
    assert keys(rm.list(sources=["ag_1"])) == ["task:ag_1", "shared:note"]
    assert keys(rm.list(kind="task_result", sources=["ag_1"])) == ["task:ag_1"]
    assert rm.list(sources=[]) == []
    with pytest.raises(BadRequest):
        rm.list(kind="result")


def test_seed_inputs_is_one_batch(rm, store):
    entries = rm.seed_inputs({"topic": "rates", "limits": {"max": 3}})
    assert store.batches == 1 and store.puts == 0
    assert [(e.key, e.kind, e.title) for e in entries] == [("input:topic", "input", "topic"), ("input:limits", "input", "limits")]
    with pytest.raises(BadRequest):
        rm.seed_inputs({"fine": 1, "bad name": 2})
    assert "input:fine" not in rm  # validated before anything is written


def test_load_reads_a_persisted_run(rm, store):
    rm.set("task:ag_1", "task_result", {"a": 1})
    rm.set("shared:x", "shared", "y")
    again = RunScratchpad.load(store, "t1", "ag_lead", "run_1", settings())
    assert again.list() == rm.list()
    assert RunScratchpad.load(store, "t1", "ag_lead", "run_2", settings()).list() == []


def test_concurrent_set_from_threads(store):
    rm = RunScratchpad(store, "t1", "ag", "run_1", settings())
    barrier = threading.Barrier(8)

    def writer(n: int) -> None:
        barrier.wait()
        for i in range(50):
            rm.set(f"task:w{n}_{i}", "task_result", {"n": n, "i": i}, source=f"w{n}")
            rm.set("shared:last", "shared", n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(rm) == 401
    assert len({e.created_at for e in rm.list()}) == 401  # distinct, ordered instants
    assert rm.get("shared:last").value == store.rows[("t1", "ag", "run_1", "shared:last")].value
    assert all(len(rm.list(sources=[f"w{n}"])) == 50 for n in range(8))


def test_works_without_a_store():
    rm = RunScratchpad(None, "t1", "ag", "run_1", settings())
    rm.seed_inputs({"a": 1})
    assert rm.set("shared:b", "shared", 2).value == 2 and len(rm) == 2


# --- the tools over a RunScratchpad (no AWS: the list cap and key handling) ------------------------
def _ctx(rm, *, team=()):
    deps = SimpleNamespace(settings=settings())
    agent = SimpleNamespace(id="ag_lead", team=list(team))
    return ToolContext("t1", agent, "", "run_1", deps, state={RUN_MEMORY: rm} if rm is not None else {})


def test_memory_list_cap_keeps_the_newest(rm):
    for i in range(250):
        rm.set(f"shared:k{i:03d}", "shared", i)
    registry = ToolRegistry()
    register_tools(registry)
    out = registry.call("memory_list", {}, _ctx(rm)).content
    assert (out["total"], out["returned"], out["truncated"]) == (250, 200, True)
    assert [e["key"] for e in out["entries"]] == [f"shared:k{i:03d}" for i in range(50, 250)]
    assert "value" not in out["entries"][0] and out["entries"][0]["valueBytes"] == 2
    narrow = registry.call("memory_list", {"key_prefix": "shared:k24"}, _ctx(rm)).content
    assert (narrow["total"], narrow["returned"], narrow["truncated"]) == (10, 10, False)


def test_offline_intents():
    message = "# Required upstream memory (call `memory_read` with these keys):\n- task:ag_123 — Analyst\n- shared:plan"
    assert _read_intent("Write the report.\n\n" + message + "\n\nThen decide.") == {"keys": ["task:ag_123", "shared:plan"]}
    assert _read_intent("- task:ag_1 — not under a memory_read line") is None
    assert _read_intent("call memory_read later") is None
    assert _learning_intent("Done.\nLearning: check liquidity first\n") == {"learning": "check liquidity first"}
    assert _learning_intent("no learning here") is None


def test_total_bytes_of_a_run_are_capped_and_overwrites_may_shrink(store):
    rm = RunScratchpad(store, "t1", "ag", "run_1", settings(RUN_MEMORY_VALUE_MAX_BYTES=1024, RUN_MEMORY_MAX_BYTES=2048))
    rm.set("shared:a", "shared", "x" * 1000)  # 1002 bytes as JSON
    rm.set("shared:b", "shared", "x" * 1000)
    with pytest.raises(QuotaExceeded) as err:
        rm.set("shared:c", "shared", "x" * 100)
    assert err.value.status == 409 and err.value.code == "quota_exceeded" and "2048" in err.value.message
    assert err.value.field == "value"
    assert rm.get("shared:c") is None and ("t1", "ag", "run_1", "shared:c") not in store.rows
    with pytest.raises(QuotaExceeded):
        rm.seed_inputs({"late": "y" * 50})
    rm.set("shared:a", "shared", "small")  # overwriting with less frees room
    rm.set("shared:c", "shared", "x" * 100)
    assert len(rm) == 3
