"""`conversation_search`: recall over everything said to an agent, across its sessions with this user.

Every successful turn archives its text messages (``recall/archive.py``) in the same transaction
that commits it, so what the history cap later trims away is still here. A search ranks the
agent's archive with ``recall/search.py``.

The per-container cache
-----------------------
Keyed by (table, tenant, agentId): a query built from one tenant's key can only ever read, cache
and return that tenant's agent partition. Each search first reads what was archived since the
entry's last read (one GSI1 Query, ``Archive.load_since``), so a search right after a turn
sees that turn. Bounds:

- ``MAX_AGENTS`` = 32 agents per container, least recently searched evicted first;
- ``MAX_TURNS_PER_AGENT`` = 5,000 archived messages per agent, the newest kept (older ones stay
  stored but are not searched);
- ``MAX_CACHED_CHARS`` = 8,000,000 characters of text over all agents: measured, the index costs
  ~12-14 bytes per character of text (~9-11 before the exact word forms were indexed too, +27%) plus
  the held items (~1 KB per message with its text), so about 125 MB of the chat function's 1 GB at
  the worst; the least recently searched agents go first,
  and one agent alone keeps only its newest messages within it;
- ``MAX_AGE_S`` = 900: an entry older than 15 minutes is rebuilt from scratch (this also picks up
  backfilled items written with an old timestamp);
- incremental reads start ``OVERLAP_S`` = 120 s before the previous read began (GSI replication
  lag, clock skew between containers) and skip items already held.

A deleted session's turns leave every cache: this container drops them at once; others see the
tombstone ``Archive.delete_session`` writes on their next incremental read (and would drop
them at the latest when the entry expires).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.kernel.ids import check_id
from engram.recall.archive import KIND_MESSAGE, KIND_TOMBSTONE, on_session_deleted
from engram.recall.params import Params
from engram.recall.search import SearchIndex

if TYPE_CHECKING:
    from engram.recall.ports import Archive

MAX_AGENTS = 32
MAX_TURNS_PER_AGENT = 5000
MAX_CACHED_CHARS = 8_000_000
MAX_AGE_S = 900.0
OVERLAP_S = 120
TOOL_TEXT_CHARS = 600  # text of one hit as the tool shows it to the model

# The ranker's configuration; bench/locomo.py may swap it to measure variants.
PARAMS = Params()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Entry:
    index: SearchIndex
    items: list[dict[str, Any]] = field(default_factory=list)  # doc number -> archived item (public fields)
    seen: set[str] = field(default_factory=set)  # SKs held
    tombstones: dict[str, str] = field(default_factory=dict)  # sessionId -> deletedAt
    read_from: str | None = None  # `after` of the next incremental read
    built_at: float = 0.0
    chars: int = 0

    def holds_dropped(self) -> bool:
        return any(
            i["sessionId"] in self.tombstones and i.get("archivedAt", "") <= self.tombstones[i["sessionId"]] for i in self.items
        )


_INTERNAL = ("SK", "archivedAt", "kind")


def _public(item: Mapping[str, object]) -> dict[str, object]:
    """What the cache holds of an item: the hit fields plus what it needs itself (``_INTERNAL``)."""
    out = {
        "kind": item.get("kind"),
        "sessionId": item.get("sessionId"),
        "role": item.get("role"),
        "text": item.get("text", ""),
        "createdAt": item.get("createdAt"),
        "runId": item.get("runId"),
        "archivedAt": item.get("archivedAt"),
        "SK": item.get("SK"),
    }
    for optional in ("speaker", "seq", "part"):
        if item.get(optional) is not None:
            out[optional] = item[optional]
    return out


class RecallCache:
    """The per-container, bounded, incrementally refreshed search cache (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.RLock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def forget(self, table: str, tenant: str, agent_id: str) -> None:
        with self._lock:
            self._entries.pop((table, tenant, agent_id), None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "agents": len(self._entries),
                "turns": sum(len(e.items) for e in self._entries.values()),
                "chars": sum(e.chars for e in self._entries.values()),
            }

    def search(
        self, archive: Archive, tenant: str, agent_id: str, query: str, *, limit: int, session_id: str | None
    ) -> list[dict[str, object]]:
        key = (archive.name, tenant, agent_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or time.monotonic() - entry.built_at > MAX_AGE_S:
                entry = self._build(archive, tenant, agent_id)
                self._entries[key] = entry
            else:
                self._refresh(entry, archive, tenant, agent_id)
            self._entries.move_to_end(key)
            self._evict()
            allowed = None
            if session_id is not None:
                allowed = lambda d: entry.items[d]["sessionId"] == session_id  # noqa: E731
            ranked = entry.index.search(query, limit=limit, allowed=allowed, today=datetime.now(UTC).date().toordinal())
            return [{**entry.items[d], "score": round(score, 4)} for d, score in ranked]

    # --- loading ------------------------------------------------------------------------------
    def _build(self, archive: Archive, tenant: str, agent_id: str) -> _Entry:
        started = time.time()
        items = archive.load_since(tenant, agent_id, None, limit=MAX_TURNS_PER_AGENT)
        entry = _Entry(index=SearchIndex(PARAMS), built_at=time.monotonic(), read_from=_iso(started - OVERLAP_S))
        self._ingest(entry, items)
        return entry

    def _refresh(self, entry: _Entry, archive: Archive, tenant: str, agent_id: str) -> None:
        started = time.time()
        fresh = archive.load_since(tenant, agent_id, entry.read_from)
        entry.read_from = _iso(started - OVERLAP_S)
        if fresh:
            self._ingest(entry, fresh)

    def _ingest(self, entry: _Entry, items: list[dict[str, Any]]) -> None:
        """Tombstones first (they may arrive after, or even before, the turns they delete), then turns."""
        dropped_some = False
        for item in items:
            if item.get("kind") == KIND_TOMBSTONE:
                sid = item.get("sessionId", "")
                if item.get("archivedAt", "") > entry.tombstones.get(sid, ""):
                    entry.tombstones[sid] = item["archivedAt"]
                    dropped_some = True
        if dropped_some and entry.holds_dropped():
            # rare: rebuild from what is still held (the index is append-only)
            self._rebuild(entry, [i for i in entry.items if not self._dropped(entry, i)])
        for item in items:
            if item.get("kind") != KIND_MESSAGE or item.get("SK") in entry.seen or self._dropped(entry, item):
                continue
            self._hold(entry, _public(item))
        if len(entry.items) > MAX_TURNS_PER_AGENT * 1.1 or entry.chars > MAX_CACHED_CHARS:
            held, chars = [], 0
            for public in reversed(entry.items[-MAX_TURNS_PER_AGENT:]):  # the newest are kept
                chars += len(public["text"])
                if chars > MAX_CACHED_CHARS:
                    break
                held.append(public)
            self._rebuild(entry, held[::-1])

    @staticmethod
    def _hold(entry: _Entry, public: dict[str, Any]) -> None:
        entry.index.add(
            public["text"],
            speaker=public.get("speaker"),
            group=public["sessionId"],
            when=public["createdAt"],
            role=public.get("role"),
        )
        entry.items.append(public)
        entry.seen.add(public["SK"])
        entry.chars += len(public["text"])

    def _rebuild(self, entry: _Entry, held: list[dict[str, object]]) -> None:
        entry.index, entry.items, entry.seen, entry.chars = SearchIndex(PARAMS), [], set(), 0
        for public in held:
            self._hold(entry, public)

    @staticmethod
    def _dropped(entry: _Entry, item: dict[str, Any]) -> bool:
        deleted_at = entry.tombstones.get(item.get("sessionId", ""))
        return deleted_at is not None and item.get("archivedAt", "") <= deleted_at

    def _evict(self) -> None:
        # expired entries go too (e.g. of an agent deleted meanwhile: nothing would refresh them)
        now = time.monotonic()
        for key in [k for k, e in list(self._entries.items())[:-1] if now - e.built_at > MAX_AGE_S]:
            del self._entries[key]
        while len(self._entries) > MAX_AGENTS:
            self._entries.popitem(last=False)
        while len(self._entries) > 1 and sum(e.chars for e in self._entries.values()) > MAX_CACHED_CHARS:
            self._entries.popitem(last=False)


_cache = RecallCache()
on_session_deleted(_cache.forget)


def conversation_search(
    archive: Archive, tenant: str, agent_id: str, query: str, *, limit: int = 10, session_id: str | None = None
) -> list[dict[str, Any]]:
    """Earlier messages of this agent with this tenant, best first, from every session (or one).

    Hits: ``sessionId, role, speaker?, text, createdAt, runId, score`` (and ``seq``/``part``
    when the item has them).
    """
    check_id("agentId", agent_id)
    if session_id is not None:
        check_id("sessionId", session_id)
    if not isinstance(query, str) or not query.strip() or limit <= 0:
        return []
    hits = _cache.search(archive, tenant, agent_id, query, limit=limit, session_id=session_id)
    for hit in hits:
        for name in _INTERNAL:
            hit.pop(name, None)
    return hits


def clear_cache() -> None:
    """Tests and benchmarks start from a cold container."""
    _cache.clear()


def cache_stats() -> dict[str, int]:
    return _cache.stats()
