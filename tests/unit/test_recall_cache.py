"""The per-container recall cache, the conversation_search tool's input, output and offline intent."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from engram.aws.queues import Queues
from engram.aws.table import Table
from engram.conversations.transcripts import HistoryRepository
from engram.engine.tools import ToolContext, ToolRegistry
from engram.kernel.errors import BadRequest
from engram.kernel.settings import Settings
from engram.recall import index as recall
from engram.recall import tools as recall_tools
from engram.recall.archive import ArchiveRepository, split_text
from engram.wiring.stores import Stores, clients


class FakeArchive:
    """load_since over an in-memory list ordered like GSI1 (what the cache needs of ArchiveRepository)."""

    name = "fake-table"

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.calls: list[tuple[str, str | None, int | None]] = []
        self._store = ArchiveRepository(Table("fake-table"))

    def add_turn(self, t: str, agent: str, session: str, run: str, text: str, at: str) -> None:
        msgs = [{"role": "user", "content": [{"type": "text", "text": text}]}]
        self.items.setdefault((t, agent), []).extend(self._store.items_for_turn(t, agent, session, run, msgs, at))

    def tombstone(self, t: str, agent: str, session: str, at: str, *, lagging: bool = False) -> None:
        """Deletes a session's items (``lagging``: the index still returns them for a while)."""
        if not lagging:
            self.items[(t, agent)] = [i for i in self.items.get((t, agent), []) if i["sessionId"] != session]
        self.items[(t, agent)].append(
            {"kind": "session_deleted", "sessionId": session, "archivedAt": at, "GSI1SK": f"{at}#~del#{session}"}
        )

    def load_since(self, t: str, agent: str, after: str | None, *, limit: int | None = None) -> list[dict[str, Any]]:
        self.calls.append((agent, after, limit))
        rows = sorted(self.items.get((t, agent), []), key=lambda i: i["GSI1SK"])
        rows = [i for i in rows if after is None or i["GSI1SK"] > after]
        return rows[-limit:] if limit else rows


@pytest.fixture(autouse=True)
def cold_cache():
    recall.clear_cache()
    yield
    recall.clear_cache()


@pytest.fixture
def archive():
    return FakeArchive()


def _at(offset_ms: int = 0) -> str:
    """Now, as a turn committed now would stamp it (incremental reads start from the last read)."""
    return recall._iso(time.time() + offset_ms / 1000)


def test_search_reads_incrementally_and_sees_new_turns(archive):
    archive.add_turn("t1", "a1", "s1", "r1", "we planned a trip to Lisbon", _at(1))
    assert [h["text"] for h in recall.conversation_search(archive, "t1", "a1", "Lisbon")] == ["we planned a trip to Lisbon"]
    archive.add_turn("t1", "a1", "s2", "r2", "Lisbon again, with tram rides", _at(2))
    hits = recall.conversation_search(archive, "t1", "a1", "tram Lisbon")
    assert hits[0]["sessionId"] == "s2" and len(hits) == 2
    assert set(hits[0]) >= {"sessionId", "role", "text", "createdAt", "runId", "score"} and "SK" not in hits[0]
    first, second = archive.calls[0], archive.calls[1]
    assert first[1] is None and first[2] == recall.MAX_TURNS_PER_AGENT  # a cold entry reads the newest, capped
    assert second[1] is not None and second[2] is None  # then only what is newer (with an overlap)


def test_overlapping_reads_do_not_duplicate(archive, monkeypatch):
    monkeypatch.setattr(recall, "OVERLAP_S", 10**9)  # every read re-reads everything
    archive.add_turn("t1", "a1", "s1", "r1", "a note about quinces", _at(1))
    for _ in range(3):
        assert len(recall.conversation_search(archive, "t1", "a1", "quinces")) == 1


def test_session_filter(archive):
    archive.add_turn("t1", "a1", "s1", "r1", "quinces in the first session", _at(1))
    archive.add_turn("t1", "a1", "s2", "r2", "quinces in the second session", _at(2))
    assert {h["sessionId"] for h in recall.conversation_search(archive, "t1", "a1", "quinces", session_id="s1")} == {"s1"}
    with pytest.raises(BadRequest):
        recall.conversation_search(archive, "t1", "a1", "quinces", session_id="../x")


def test_entries_are_per_tenant_and_agent(archive):
    archive.add_turn("t1", "a1", "s1", "r1", "the secret word is marmalade", _at(1))
    archive.add_turn("t2", "a1", "s1", "r1", "nothing to see", _at(1))
    assert recall.conversation_search(archive, "t1", "a1", "marmalade")
    assert recall.conversation_search(archive, "t2", "a1", "marmalade") == []
    assert recall.conversation_search(archive, "t1", "a2", "marmalade") == []


@pytest.mark.parametrize("overlap", [0, 120])
def test_tombstones_drop_a_deleted_session_from_a_warm_cache(archive, monkeypatch, overlap):
    monkeypatch.setattr(recall, "OVERLAP_S", overlap)
    archive.add_turn("t1", "a1", "s1", "r1", "my bike is green", _at(1))
    archive.add_turn("t1", "a1", "s2", "r2", "my bike has a bell", _at(2))
    assert len(recall.conversation_search(archive, "t1", "a1", "bike")) == 2
    archive.tombstone("t1", "a1", "s1", _at(3))  # another container deleted s1
    assert [h["sessionId"] for h in recall.conversation_search(archive, "t1", "a1", "bike")] == ["s2"]
    archive.add_turn("t1", "a1", "s1", "r3", "a new bike talk in the emptied session", _at(4))
    assert {h["sessionId"] for h in recall.conversation_search(archive, "t1", "a1", "bike")} == {"s1", "s2"}


def test_a_tombstone_read_with_the_turns_it_deletes_wins(archive):
    archive.add_turn("t1", "a1", "s1", "r1", "my bike is green", _at(1))
    archive.add_turn("t1", "a1", "s2", "r2", "my bike has a bell", _at(2))
    archive.tombstone("t1", "a1", "s1", _at(3), lagging=True)  # deleted, but the GSI still lists it
    assert [h["sessionId"] for h in recall.conversation_search(archive, "t1", "a1", "bike")] == ["s2"]


def test_lru_over_agents(archive, monkeypatch):
    monkeypatch.setattr(recall, "MAX_AGENTS", 3)
    for i in range(5):
        archive.add_turn("t1", f"a{i}", "s", "r", "apples", _at(1))
        recall.conversation_search(archive, "t1", f"a{i}", "apples")
    assert recall.cache_stats()["agents"] == 3


def test_char_budget_evicts_least_recent_agents(archive, monkeypatch):
    monkeypatch.setattr(recall, "MAX_CACHED_CHARS", 100)
    for i in range(4):
        archive.add_turn("t1", f"a{i}", "s", "r", "pears " * 10, _at(1))  # 60 chars each
        recall.conversation_search(archive, "t1", f"a{i}", "pears")
    assert recall.cache_stats()["agents"] == 1


def test_one_large_agent_keeps_its_newest_within_the_char_budget(archive, monkeypatch):
    monkeypatch.setattr(recall, "MAX_CACHED_CHARS", 100)
    for i in range(5):
        archive.add_turn("t1", "a1", "s", f"r{i}", f"cherries {i} " + "x" * 30, _at(i))  # ~42 chars each
    hits = recall.conversation_search(archive, "t1", "a1", "cherries", limit=10)
    assert [h["runId"] for h in hits] and {h["runId"] for h in hits} == {"r3", "r4"}


def test_turn_cap_keeps_the_newest(archive, monkeypatch):
    monkeypatch.setattr(recall, "MAX_TURNS_PER_AGENT", 10)
    monkeypatch.setattr(recall, "OVERLAP_S", 0)
    for i in range(30):
        archive.add_turn("t1", "a1", "s", f"r{i:02d}", f"plums number {i}", _at(i))
    hits = recall.conversation_search(archive, "t1", "a1", "plums", limit=50)
    assert len(hits) == 10 and {h["runId"] for h in hits} == {f"r{i:02d}" for i in range(20, 30)}
    for i in range(30, 45):
        archive.add_turn("t1", "a1", "s", f"r{i:02d}", f"plums number {i}", _at(i))
    hits = recall.conversation_search(archive, "t1", "a1", "plums", limit=50)
    assert len(hits) <= 11 and "r44" in {h["runId"] for h in hits}


def test_expired_entries_are_rebuilt(archive, monkeypatch):
    archive.add_turn("t1", "a1", "s", "r", "figs", _at(1))
    recall.conversation_search(archive, "t1", "a1", "figs")
    monkeypatch.setattr(recall, "MAX_AGE_S", -1.0)
    recall.conversation_search(archive, "t1", "a1", "figs")
    assert [c[1] for c in archive.calls] == [None, None]


def test_blank_queries(archive):
    archive.add_turn("t1", "a1", "s", "r", "figs", _at(1))
    assert recall.conversation_search(archive, "t1", "a1", "   ") == []
    assert recall.conversation_search(archive, "t1", "a1", "figs", limit=0) == []


# --- the tool -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, query",
    [
        ("did we talk about pottery?", "pottery"),
        ("Did we ever discuss the Lisbon trip?", "the Lisbon trip"),
        ("search our conversations for quarterly budget", "quarterly budget"),
        ("Search the chat history for 'tram'", "tram"),
        ("what did I say about my sister?", "my sister"),
        ("have we talked about gardening", "gardening"),
        ("hello there", None),
        ("what time is it?", None),
    ],
)
def test_offline_intent(text, query):
    assert recall_tools._intent(text) == (None if query is None else {"query": query})


def test_tool_is_registered_with_its_schema():
    registry = ToolRegistry()
    recall_tools.register_tools(registry)
    spec = next(s for s in registry.specs() if s["name"] == "conversation_search")
    props = spec["input_schema"]["properties"]
    assert set(props) == {"query", "limit", "session_id"} and spec["input_schema"]["required"] == ["query"]
    assert props["limit"]["default"] == 5 and props["limit"]["maximum"] == 20
    assert "conversation_search" in registry.offline_intents()


@pytest.mark.parametrize(
    "bad",
    [
        {"query": ""},
        {"query": "x" * 501},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 21},
        {"query": "x", "session_id": "../etc"},
        {"query": "x", "extra": 1},
        {},
    ],
)
def test_tool_input_is_validated(bad):
    with pytest.raises(ValidationError):
        recall_tools.ConversationSearchInput.model_validate(bad)


def test_tool_output_trims_long_text_and_says_no_matches(archive):
    archive.add_turn("t1", "a1", "s1", "r1", "budget " + "x" * 3000, _at(1))
    registry = ToolRegistry()
    recall_tools.register_tools(registry)
    deps = Stores(**clients(Settings(), table=Table("x"), history=HistoryRepository("b"), queues=Queues("q", "q")))
    deps.archive = archive  # the tool reads the archive of its turn's stores
    ctx = ToolContext(tenant="t1", agent=SimpleNamespace(id="a1"), session_id="s1", run_id="run1", deps=deps)
    out = registry.call("conversation_search", {"query": "budget"}, ctx)
    assert not out.is_error and len(out.content) == 1
    hit = out.content[0]
    assert hit["session"] == "s1" and hit["time"] and hit["ago"] == "just now" and hit["role"] == "user"
    assert len(hit["text"]) <= recall.TOOL_TEXT_CHARS and hit["text"].endswith("…")
    none = registry.call("conversation_search", {"query": "zeppelin"}, ctx)
    assert isinstance(none.content, str) and none.content.startswith("No matches")
    bad = registry.call("conversation_search", {"query": ""}, ctx)
    assert bad.is_error


def test_long_messages_are_split_into_capped_parts():
    text = ("word " * 2500).strip()  # 12,499 chars
    parts = split_text(text)
    assert len(parts) == 4 and all(len(p) <= 4000 for p in parts) and " ".join(parts) == text
    assert len(split_text("y" * 50_000)) == 8  # at most 8 parts per message
    store = ArchiveRepository(Table("x"))
    items = store.items_for_turn(
        "t1",
        "a1",
        "s1",
        "r1",
        [
            {"role": "user", "content": [{"type": "text", "text": text}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "u1", "name": "get_current_time", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "12:00"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "u2", "name": "get_current_time", "input": {}}]},
            {"role": "assistant", "content": "a plain string reply"},
        ],
        "2030-01-01T10:00:00.000Z",
    )
    assert [(i["role"], i.get("part")) for i in items] == [
        ("user", 0),
        ("user", 1),
        ("user", 2),
        ("user", 3),
        ("assistant", None),
        ("assistant", None),
    ]
    assert items[4]["tools"] == ["get_current_time"] and items[4]["text"] == "ok"
    assert [i["seq"] for i in items] == list(range(6)) and len({i["SK"] for i in items}) == 6
    assert all(i["GSI1PK"] == "t1#A#a1#ARCH" and i["PK"] == "t1#A#a1" for i in items)
