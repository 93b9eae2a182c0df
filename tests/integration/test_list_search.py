"""Search on the server (issue 38, item 2): `q` on the memory, facts and runs listings finds a row
anywhere in the person's data, not only on the page a console shows; memory and facts rank the
best match first as recall does; runs filter by agent, kind, status and time across agents, paged;
bad filters are a 400 naming the parameter; another person's rows never match."""

from __future__ import annotations

from typing import Any

from engram.kernel.ids import tenant_key, time_ordered_id
from engram.runs.models import Run
from tests.integration.test_list_paging import walk


def add_memories(stack, owner: str, n: int, user: str = "alice") -> None:
    for i in range(n):
        r = stack.call("POST", f"{owner}/memories", user=user, body={"key": f"note {i}", "value": f"zebra{i} stripes"})
        assert r.status == 201, r.body


def test_memory_q_finds_a_row_past_the_first_page_and_ranks_shared_words_first(stack):
    owner = f"/api/agents/{stack.agent()['id']}"
    add_memories(stack, owner, 120)
    r = stack.call("GET", f"{owner}/memories", query={"q": "zebra117"})
    assert r.status == 200 and [m["key"] for m in r.data["items"]] == ["note 117"]
    # a part of a word matches as typed; every match is found, paged
    items, _ = walk(stack, f"{owner}/memories", 50, q="zebra11")
    assert sorted(m["key"] for m in items) == sorted(["note 11", *(f"note {i}" for i in range(110, 120))])
    # more shared words rank first (recall's order), then the list's own order
    stack.call("POST", f"{owner}/memories", body={"key": "favourite", "value": "striped zebra117 in the zoo", "importance": 90})
    r = stack.call("GET", f"{owner}/memories", query={"q": "zebra117 zoo"})
    assert [m["key"] for m in r.data["items"]] == ["favourite", "note 117"]
    assert stack.call("GET", f"{owner}/memories", query={"q": "nothing-like-it"}).data == {"items": [], "nextToken": None}


def test_memory_source_filter_and_bad_values(stack):
    agent = stack.agent()
    owner = f"/api/agents/{agent['id']}"
    add_memories(stack, owner, 3)
    assert len(stack.call("GET", f"{owner}/memories", query={"source": "manual,chat"}).data["items"]) == 3
    assert stack.call("GET", f"{owner}/memories", query={"source": "auto"}).data["items"] == []
    for query in ({"source": "bogus"}, {"q": "x" * 201}):
        r = stack.call("GET", f"{owner}/memories", query=query)
        assert r.status == 400 and r.error["field"] in query, r.body
    # a token of an unfiltered walk does not page a search
    token = stack.call("GET", f"{owner}/memories", query={"limit": "1"}).data["nextToken"]
    r = stack.call("GET", f"{owner}/memories", query={"q": "zebra1", "limit": "1", "nextToken": token})
    assert r.status == 400 and r.error["code"] == "invalid_token"


def test_another_persons_memories_and_facts_never_match(stack):
    mine = f"/api/agents/{stack.agent()['id']}"
    theirs = f"/api/agents/{stack.agent(user='bob')['id']}"
    add_memories(stack, theirs, 2, user="bob")
    stack.call("POST", "/api/me/facts", user="bob", body={"fact": "I keep zebra1 as a pet"})
    assert stack.call("GET", f"{mine}/memories", query={"q": "zebra1"}).data["items"] == []
    assert stack.call("GET", f"{theirs}/memories", query={"q": "zebra1"}).status == 404
    assert stack.call("GET", "/api/me/facts", query={"q": "zebra1"}).data["items"] == []


def test_facts_q_searches_every_fact(stack):
    for i in range(60):
        assert stack.call("POST", "/api/me/facts", body={"fact": f"I visited city number {i}"}).status in (200, 201)
    stack.call("POST", "/api/me/facts", body={"fact": "My cat is called Pixel", "topic": "pets"})
    assert [f["fact"] for f in stack.call("GET", "/api/me/facts", query={"q": "pixel"}).data["items"]] == [
        "My cat is called Pixel"
    ]
    assert len(stack.call("GET", "/api/me/facts", query={"q": "pets"}).data["items"]) == 1  # the topic counts
    items, _ = walk(stack, "/api/me/facts", 25, q="city")
    assert len(items) == 60


def put_run(stack, agent_id: str, ms: int, user: str = "alice", **fields: Any) -> str:
    run_id = time_ordered_id("run", ms, ms.to_bytes(10, "big"))
    stamp = f"2026-01-{max(1, ms // 86_400_000):02d}T00:00:00.000Z"  # day N of January
    run = Run(id=run_id, agent_id=agent_id, created_at=stamp, updated_at=stamp, **fields)
    stack.deps.runs.create(tenant_key(user), run)
    return run_id


def test_runs_across_agents_filter_and_page_newest_first(stack):
    a, b = stack.agent()["id"], stack.agent(name="Bo")["id"]
    day = 86_400_000
    ids = {
        "a-chat": put_run(stack, a, 1 * day, kind="chat", status="succeeded", prompt="hello there"),
        "b-heartbeat": put_run(stack, b, 2 * day, kind="heartbeat", status="failed", prompt="check the queue"),
        "a-manual": put_run(stack, a, 3 * day, kind="manual", status="succeeded", prompt="price of zebra stock"),
        "b-manual": put_run(stack, b, 4 * day, kind="manual", status="queued", prompt="later"),
    }
    for i in range(30):  # more runs than a page
        put_run(stack, a, 5 * day + i, kind="chat", status="succeeded", prompt=f"turn {i}")
    items, tokens = walk(stack, "/api/runs", 10)
    assert len(items) == 34 and len(tokens) == 3
    assert [r["id"] for r in items] == sorted((r["id"] for r in items), reverse=True)
    assert {r["agentId"] for r in items} == {a, b}

    def found(**query: str) -> list[str]:
        items, _ = walk(stack, "/api/runs", 5, **query)
        return [r["id"] for r in items]

    assert found(kind="manual") == [ids["b-manual"], ids["a-manual"]]
    assert found(status="failed,queued") == [ids["b-manual"], ids["b-heartbeat"]]
    assert found(agentId=b) == [ids["b-manual"], ids["b-heartbeat"]]
    assert found(q="zebra") == [ids["a-manual"]]
    assert found(since="2026-01-02", until="2026-01-03") == [ids["a-manual"], ids["b-heartbeat"]]  # whole days
    assert found(status="awaiting_approval") == []
    # the agent's own list takes the same filters
    r = stack.call("GET", f"/api/agents/{a}/runs", query={"kind": "manual"})
    assert [x["id"] for x in r.data["items"]] == [ids["a-manual"]]
    for query in ({"kind": "nap"}, {"status": "done"}, {"since": "yesterday"}, {"nextToken": "nope"}):
        r = stack.call("GET", "/api/runs", query=query)
        assert r.status == 400 and r.error["field"] in query, (query, r.body)
    assert stack.call("GET", "/api/runs", query={"agentId": "ag_nobody"}).status == 404


def test_runs_of_another_person_never_show(stack):
    mine = stack.agent()["id"]
    theirs = stack.agent(user="bob")["id"]
    put_run(stack, theirs, 1000, kind="manual", status="succeeded", prompt="secret plan", user="bob")
    put_run(stack, mine, 2000, kind="manual", status="succeeded", prompt="my plan")
    assert [r["prompt"] for r in stack.call("GET", "/api/runs").data["items"]] == ["my plan"]
    assert stack.call("GET", "/api/runs", query={"agentId": theirs}).status == 404


def test_a_council_leads_members_are_listed(stack):
    lead_agent, member_agent = stack.agent()["id"], stack.agent(name="Specialist")["id"]
    put_run(stack, member_agent, 500, kind="manual", status="succeeded")  # older, of no council
    lead = put_run(stack, lead_agent, 1000, kind="manual", status="succeeded")
    members = [put_run(stack, member_agent, 2000 + i, kind="council_member", council_run_id=lead) for i in range(3)]
    put_run(stack, member_agent, 9000, kind="council_member", council_run_id="run_other")
    r = stack.call("GET", "/api/runs", query={"councilRunId": lead})
    assert r.status == 200 and [x["id"] for x in r.data["items"]] == members[::-1]
    assert stack.call("GET", "/api/runs", query={"councilRunId": "run_nope"}).status == 404
