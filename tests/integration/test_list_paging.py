"""Every list pages with `limit` and `nextToken` (issue 11, item 7): walking the pages returns each
item exactly once, in the list's order; tokens are opaque and only good for the list that issued
them (anything else is a 400 `invalid_token`); the default page is bounded."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from engram.kernel.ids import tenant_key
from engram.kernel.settings import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from engram.run_memory.models import RunMemoryEntry
from engram.runs.models import Run
from engram.usage.models import UsageRow
from engram.wiring.stores import Stores

LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024


def walk(stack, path: str, limit: int, **query: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every item of a list, page by page, and the tokens it was handed."""
    items: list[dict[str, Any]] = []
    tokens: list[str] = []
    token = None
    while True:
        r = stack.call("GET", path, query={**query, "limit": str(limit), **({"nextToken": token} if token else {})})
        assert r.status == 200, r.body
        assert len(r.data["items"]) <= limit
        items += r.data["items"]
        token = r.data["nextToken"]
        if token is None:
            return items, tokens
        tokens.append(token)


def unreadable(token: str, *secrets: str) -> bool:
    """An opaque token: URL-safe, and none of the words the list holds shows through it."""
    return all(c.isalnum() or c in "-_" for c in token) and not any(s in token for s in secrets)


def assert_bad_tokens(stack, path: str, foreign: str) -> None:
    for token in ("nope", "e30", base64.urlsafe_b64encode(b'{"l":"x","a":"y"}').decode(), foreign):
        r = stack.call("GET", path, query={"limit": "2", "nextToken": token})
        assert r.status == 400 and r.error["code"] == "invalid_token" and r.error["field"] == "nextToken", (token, r.body)


def memory(stack, owner: str, key: str, **fields: Any) -> dict[str, Any]:
    r = stack.call("POST", f"{owner}/memories", body={"key": key, "value": f"value of {key}", **fields})
    assert r.status == 201, r.body
    return r.data


@pytest.mark.parametrize("scope", ["agents", "workspaces"])
def test_memory_lists_page_in_their_order(stack, scope):
    owner_id = stack.agent()["id"] if scope == "agents" else stack.call("POST", "/api/workspaces", body={"name": "W"}).data["id"]
    owner = f"/api/{scope}/{owner_id}"
    for i in range(11):
        memory(stack, owner, f"secret-key-{i:02d}", importance=(i % 3) * 10, pinned=i == 7)
    gone = memory(stack, owner, "archived-one")
    stack.call("DELETE", f"{owner}/memories/{gone['id']}")
    whole = stack.call("GET", f"{owner}/memories", query={"limit": str(LIST_LIMIT_MAX)}).data
    assert whole["nextToken"] is None and len(whole["items"]) == 11

    items, tokens = walk(stack, f"{owner}/memories", 3)
    assert [m["id"] for m in items] == [m["id"] for m in whole["items"]]  # each once, in LT3's order
    assert items[0]["key"] == "secret-key-07" and len(tokens) == 3
    assert all(unreadable(t, "secret", "key") for t in tokens)

    # A row written between pages does not shift the next page.
    first = stack.call("GET", f"{owner}/memories", query={"limit": "4"}).data
    memory(stack, owner, "secret-key-00a", importance=90)  # ranks before every row seen so far
    rest, _ = walk(stack, f"{owner}/memories", 100, nextToken=first["nextToken"])
    assert [m["id"] for m in first["items"] + rest] == [m["id"] for m in whole["items"]]

    other = stack.agent()["id"]
    memory(stack, f"/api/agents/{other}", "a")
    memory(stack, f"/api/agents/{other}", "b")
    foreign = stack.call("GET", f"/api/agents/{other}/memories", query={"limit": "1"}).data["nextToken"]
    assert_bad_tokens(stack, f"{owner}/memories", foreign)


def test_memory_lists_page_with_archived_rows(stack):
    agent_id = stack.agent()["id"]
    owner = f"/api/agents/{agent_id}"
    rows = [memory(stack, owner, f"k{i}") for i in range(5)]
    t = tenant_key("alice")
    for row in rows[:3]:  # archived as memory_forget does (REST's DELETE removes the row)
        stored = stack.deps.memories.get(t, "agent", agent_id, row["id"])
        stack.deps.memories.put(t, stored.model_copy(update={"archived_at": stored.updated_at}), agent_id)
    assert [m["key"] for m in walk(stack, f"{owner}/memories", 1)[0]] == ["k3", "k4"]
    everything, _ = walk(stack, f"{owner}/memories", 2, includeArchived="true")
    assert [m["key"] for m in everything] == ["k0", "k1", "k2", "k3", "k4"]


def test_fact_list_pages_active_first_archived_included(stack):
    added = [stack.call("POST", "/api/me/facts", body={"fact": f"I collect stamp series {i}"}).data for i in range(9)]
    for fact in added[:4]:
        stack.call("DELETE", f"/api/me/facts/{fact['id']}")
    active, tokens = walk(stack, "/api/me/facts", 2)
    assert [f["id"] for f in active] == [f["id"] for f in reversed(added[4:])] and len(tokens) == 2
    assert all(unreadable(t, "stamp") for t in tokens)
    everything, _ = walk(stack, "/api/me/facts", 2, includeArchived="true")
    assert [f["id"] for f in everything[:5]] == [f["id"] for f in active]
    assert sorted(f["id"] for f in everything[5:]) == sorted(f["id"] for f in added[:4])
    assert all(f["archivedAt"] for f in everything[5:])
    bob = stack.call("POST", "/api/me/facts", user="bob", body={"fact": "Bob's first fact"})
    assert bob.status == 201
    stack.call("POST", "/api/me/facts", user="bob", body={"fact": "Bob's second fact"})
    foreign = stack.call("GET", "/api/me/facts", user="bob", query={"limit": "1"}).data["nextToken"]
    # A token only carries a position in a list: bob's works in alice's list without showing bob's facts.
    assert "Bob" not in str(stack.call("GET", "/api/me/facts", query={"nextToken": foreign}).body)
    agent_token = _agent_memory_token(stack)
    assert_bad_tokens(stack, "/api/me/facts", agent_token)


def _agent_memory_token(stack) -> str:
    owner = f"/api/agents/{stack.agent()['id']}"
    memory(stack, owner, "a")
    memory(stack, owner, "b")
    token = stack.call("GET", f"{owner}/memories", query={"limit": "1"}).data["nextToken"]
    assert token
    return str(token)


def _run_memory(deps: Stores, agent_id: str, run_id: str, count: int, value_chars: int) -> list[str]:
    t = tenant_key("alice")
    deps.runs.create(t, Run(id=run_id, agent_id=agent_id, kind="manual", status="succeeded", created_at="t", updated_at="t"))
    entries = [
        RunMemoryEntry(
            key=f"shared:k{i:03d}",
            kind="shared",
            value="v" * value_chars,
            created_at="2026-01-01T00:00:00.000Z",
            updated_at="2026-01-01T00:00:00.000Z",
            value_bytes=value_chars + 2,
        )
        for i in range(count)
    ]
    deps.run_memory.put_many(t, agent_id, run_id, entries)
    return [e.key for e in entries]


def test_run_memory_pages_by_count_and_by_value_bytes(stack):
    agent_id = stack.agent()["id"]
    keys = _run_memory(stack.deps, agent_id, "run_small", 7, 10)
    items, tokens = walk(stack, "/api/runs/run_small/memory", 3)
    assert [e["key"] for e in items] == keys and len(tokens) == 2
    assert all(unreadable(t, "shared") for t in tokens)
    # 64 KB values: 50 would be 3.2 MB; a page stops at 2 MB of values.
    big = _run_memory(stack.deps, agent_id, "run_big", 40, 65_000)
    first = stack.call("GET", "/api/runs/run_big/memory")
    assert len(first.data["items"]) == 30 and first.data["nextToken"]
    items, _ = walk(stack, "/api/runs/run_big/memory", LIST_LIMIT_MAX)
    assert [e["key"] for e in items] == big
    foreign = stack.call("GET", "/api/runs/run_small/memory", query={"limit": "1"}).data["nextToken"]
    assert_bad_tokens(stack, "/api/runs/run_big/memory", foreign)


def test_decisions_page_newest_first(stack):
    agent_id = stack.agent()["id"]
    t = tenant_key("alice")
    card = {"cardType": "decision", "card": {"decision": "WAIT", "reason": "r"}}
    for i in range(7):
        result = card if i % 2 else {"text": "no card"}
        stamp = f"2026-01-01T00:00:{i:02d}.000Z"
        run = Run(
            id=f"run_{i}", agent_id=agent_id, kind="manual", status="succeeded", result=result, created_at=stamp, updated_at=stamp
        )
        stack.deps.runs.create(t, run)
    items, tokens = walk(stack, f"/api/agents/{agent_id}/decisions", 2)
    assert [d["runId"] for d in items] == ["run_5", "run_3", "run_1"] and len(tokens) == 1
    r = stack.call("GET", f"/api/agents/{agent_id}/decisions", query={"nextToken": "nope"})
    assert r.status == 400 and r.error["code"] == "invalid_token"


def test_the_default_page_is_bounded_and_the_largest_page_fits_a_lambda_response(stack):
    owner = f"/api/agents/{stack.agent()['id']}"
    settings = stack.deps.settings
    # The largest rows there are: 4-byte characters, key and value at their limits.
    for i in range(LIST_LIMIT_MAX + 1):
        key = f"{i:03d}" + "\U0001f600" * (settings.memory_key_max_chars - 3)
        r = stack.call(
            "POST",
            f"{owner}/memories",
            body={"key": key, "value": "\U0001f600" * settings.memory_value_max_chars, "topic": "t" * 40},
        )
        assert r.status == 201, r.body
    default = stack.call("GET", f"{owner}/memories")
    assert len(default.data["items"]) == LIST_LIMIT_DEFAULT and default.data["nextToken"]
    largest = stack.call("GET", f"{owner}/memories", query={"limit": str(LIST_LIMIT_MAX)})
    assert len(largest.data["items"]) == LIST_LIMIT_MAX
    size = len(json.dumps(largest.body, ensure_ascii=False).encode())
    print(
        f"largest memory page: {LIST_LIMIT_MAX} rows, {size:,} bytes (default page: {len(json.dumps(default.body, ensure_ascii=False).encode()):,})"
    )
    assert size < LAMBDA_RESPONSE_LIMIT / 4
    too_many = stack.call("GET", f"{owner}/memories", query={"limit": str(LIST_LIMIT_MAX + 1)})
    assert too_many.status == 400 and too_many.error["field"] == "limit"


# ---- every list honours `limit` exactly (issue 22, item 9) -----------------------------------------
_CARD = {"fields": {"verdict": {"type": "string", "required": True}}}


def _seed(stack, kind: str, count: int) -> str:
    """`count` items in the list `kind`; returns the list's path."""
    if kind in ("runs", "re-examinations", "decisions", "usage"):
        return _seed_runs(stack, kind, count)
    if kind == "agents":
        for i in range(count):
            stack.agent(name=f"A{i}")
        return "/api/agents"
    if kind == "workspaces":
        for i in range(count):
            assert stack.call("POST", "/api/workspaces", body={"name": f"W{i}"}).status == 201
        return "/api/workspaces"
    if kind == "card-types":
        for i in range(count):
            assert stack.call("PUT", f"/api/card-types/custom-{i:02d}", body=_CARD).status in (200, 201)
        return "/api/card-types"
    if kind == "facts":
        for i in range(count):
            assert stack.call("POST", "/api/me/facts", body={"fact": f"I keep {i} different kinds of tea"}).status == 201
        return "/api/me/facts"
    agent_id = stack.agent()["id"]
    if kind == "sessions":
        for i in range(count):
            assert stack.call("POST", f"/api/agents/{agent_id}/sessions", body={"id": f"s{i}"}).status == 201
        return f"/api/agents/{agent_id}/sessions"
    if kind == "memories":
        for i in range(count):
            memory(stack, f"/api/agents/{agent_id}", f"k{i}")
        return f"/api/agents/{agent_id}/memories"
    if kind == "run-memory":
        _run_memory(stack.deps, agent_id, "run_mem", count, 10)
        return "/api/runs/run_mem/memory"
    raise AssertionError(kind)


def _seed_runs(stack, kind: str, count: int) -> str:
    t = tenant_key("alice")
    agent_id = stack.agent()["id"]
    card = {"cardType": "decision", "card": {"decision": "WAIT", "reason": "r"}}
    for i in range(count):
        stamp = f"2026-01-01T00:00:{i:02d}.000Z"
        run = Run(
            id=f"run_{i}",
            agent_id=agent_id,
            kind="reexamination" if kind == "re-examinations" else "manual",
            parent_run_id="run_parent" if kind == "re-examinations" else None,
            status="succeeded",
            result=card,
            created_at=stamp,
            updated_at=stamp,
        )
        stack.deps.runs.create(t, run)
        if kind == "usage":
            stack.deps.usage.put(
                t, UsageRow(id=f"u{i}", created_at=stamp, agent_id=agent_id, session_key="s", run_id=run.id, model="m")
            )
    return {
        "runs": f"/api/agents/{agent_id}/runs",
        "re-examinations": "/api/runs/run_parent/re-examinations",
        "decisions": f"/api/agents/{agent_id}/decisions",
        "usage": "/api/usage",
    }[kind]


LISTS = [
    "agents",
    "workspaces",
    "card-types",
    "facts",
    "sessions",
    "memories",
    "runs",
    "re-examinations",
    "decisions",
    "usage",
    "run-memory",
]


@pytest.mark.parametrize("kind", LISTS)
def test_every_list_returns_exactly_limit_items_and_no_token_to_an_empty_page(stack, kind):
    path = _seed(stack, kind, 5)
    if kind == "re-examinations":
        parent = Run(id="run_parent", agent_id="ag_x", kind="manual", status="succeeded", created_at="t", updated_at="t")
        stack.deps.runs.create(tenant_key("alice"), parent)
    whole = stack.call("GET", path, query={"limit": "20"}).data
    total = len(whole["items"])
    assert total >= 5 and whole["nextToken"] is None, whole
    for limit in (1, 2, total - 1, total):
        pages: list[int] = []
        items: list[dict[str, Any]] = []
        token = None
        while True:
            query = {"limit": str(limit), **({"nextToken": token} if token else {})}
            r = stack.call("GET", path, query=query)
            assert r.status == 200, r.body
            pages.append(len(r.data["items"]))
            items += r.data["items"]
            token = r.data["nextToken"]
            if token is None:
                break
        # Every page but the last is full, the last is not empty, and nothing is seen twice.
        assert pages[:-1] == [limit] * (len(pages) - 1) and 0 < pages[-1] <= limit, (limit, pages)
        assert items == whole["items"], limit


def test_card_types_count_the_built_ins_in_the_limit(stack):
    settings = stack.deps.settings
    _seed(stack, "card-types", settings.max_card_types)
    ten = stack.call("GET", "/api/card-types", query={"limit": "10"}).data
    assert len(ten["items"]) == 10 and ten["nextToken"]
    assert [c["name"] for c in ten["items"][:2]] == ["decision", "trade-decision"]
    default = stack.call("GET", "/api/card-types").data
    assert len(default["items"]) == LIST_LIMIT_DEFAULT and default["nextToken"]
    rest = stack.call("GET", "/api/card-types", query={"nextToken": default["nextToken"]}).data
    assert len(rest["items"]) == settings.max_card_types + 2 - LIST_LIMIT_DEFAULT and rest["nextToken"] is None
    names = [c["name"] for c in default["items"] + rest["items"]]
    assert len(set(names)) == len(names) == settings.max_card_types + 2
    r = stack.call("GET", "/api/card-types", query={"nextToken": "nope"})
    assert r.status == 400 and r.error["code"] == "invalid_token"
