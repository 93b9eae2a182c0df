"""Prompt caching as the Messages API sees it: requests through the real anthropic client with a
mocked HTTP transport; the memory snapshot of a session; the heartbeat's TTL; bounded sections."""

from __future__ import annotations

import json

from engram.conversations.snapshot import ADDED_HEADING
from engram.kernel.ids import tenant_key
from tests.fakes import claude

MODEL = "claude-sonnet-4-6"  # minimum cacheable prompt: 2,048 tokens
PERSONA = "You keep track of the team's services. " + "Answer with the exact value asked for. " * 120


def _claude(stack, bodies):
    settings = stack.deps.settings.model_copy(update={"anthropic_api_key": "sk-test"})
    ok = claude.reply([{"type": "text", "text": "noted"}], model=MODEL)
    stack.deps.provider_override = claude.provider(settings, claude.recording(bodies, lambda _body: ok))


def _prefix(body, marker_at):
    """The request's bytes up to its marked user block, markers left out (they are not content)."""

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    messages = body["messages"][: marker_at + 1]
    return json.dumps(clean({"tools": body["tools"], "system": body["system"], "messages": messages}))


def _markers(body):
    return [b["cache_control"] for b in body["system"] if "cache_control" in b] + [
        b["cache_control"] for m in body["messages"] for b in m["content"] if "cache_control" in b
    ]


def test_a_memory_stored_on_one_turn_leaves_the_next_turns_cached_prefix_as_it_was(stack):
    bodies: list[dict] = []
    _claude(stack, bodies)
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data
    agent = stack.agent(persona=PERSONA, model=MODEL, workspaceId=ws["id"], agentMemory=True)
    stack.call("POST", f"/api/workspaces/{ws['id']}/memories", body={"key": "api", "value": "the API runs on port 8080"})
    assert stack.say(agent["id"], "which port does the API use?").status == 200
    # stored between the turns (as the model's memory_store would)
    new = {"key": "db", "value": "the database runs on port 5432", "importance": 90}
    stack.call("POST", f"/api/workspaces/{ws['id']}/memories", body=new)
    stack.call("POST", "/api/me/facts", body={"fact": "I am on call this week"})
    assert stack.say(agent["id"], "and the database?").status == 200

    first, second = bodies
    assert 0 < len(_markers(first)) <= 4 and 0 < len(_markers(second)) <= 4
    # the second request starts with the first one's bytes (tools, system, the first turn's
    # marked message), so the first turn's cache entry is read, not written again
    assert _prefix(second, 0) == _prefix(first, 0)
    assert first["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "5432" not in json.dumps(second["system"])  # the snapshot is the one the session started with
    # ...and the model still sees the new memory: after the user's words, after the marker
    words, since = second["messages"][-1]["content"]
    assert words["text"] == "and the database?" and words["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in since and since["text"].startswith("## Memory stored since")
    assert '"the database runs on port 5432"' in since["text"] and '"I am on call this week"' in since["text"]
    assert since["text"].count('<memory scope="workspace">') == 1 and since["text"].rstrip().endswith("</memory>")
    # the transcript keeps what the user said, never the memory shown with it
    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert all("Memory stored since" not in json.dumps(m) for m in stored)
    # a new session starts from the memory as it is now
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "fresh"})
    stack.say(agent["id"], "hello", session="fresh")
    assert '"the database runs on port 5432"' in "".join(b["text"] for b in bodies[-1]["system"])


def test_a_forgotten_memory_is_never_shown_again(stack):
    bodies: list[dict] = []
    _claude(stack, bodies)
    agent = stack.agent(persona=PERSONA, model=MODEL, agentMemory=True)
    made = stack.call(
        "POST", f"/api/agents/{agent['id']}/memories", body={"key": "door", "value": "the office door is painted blue"}
    )
    stack.say(agent["id"], "hi")
    assert "the office door is painted blue" in json.dumps(bodies[-1]["system"])
    stack.call("DELETE", f"/api/agents/{agent['id']}/memories/{made.data['id']}")
    stack.say(agent["id"], "hi again")
    assert "the office door is painted blue" not in json.dumps(bodies[-1]["system"])  # the snapshot was taken again


def test_rows_ranked_past_the_read_page_by_newer_ones_keep_the_snapshot(stack):
    """The user's facts are read a page at a time (twice the rows shown). Facts stored since push
    the snapshot's facts past that page: not forgotten, so a deeper page finds them and the
    snapshot, and the cached prefix behind it, stay."""
    bodies: list[dict] = []
    _claude(stack, bodies)
    agent = stack.agent(persona=PERSONA, model=MODEL)
    made = [stack.call("POST", "/api/me/facts", body={"fact": f"I keep plant number {i} by the window"}).data for i in range(3)]
    stack.say(agent["id"], "hi")
    snapshot = bodies[-1]["system"][1]["text"]
    assert "plant number 0" in snapshot
    for i in range(25):
        stack.call("POST", "/api/me/facts", body={"fact": f"I visited city number {i} this spring"})
    stack.say(agent["id"], "what do you know?")
    assert bodies[-1]["system"][1]["text"] == snapshot  # kept: its cached prefix survives
    since = bodies[-1]["messages"][-1]["content"][-1]["text"]
    assert since.startswith("## Memory stored since") and "city number 24" in since
    # a fact of the snapshot forgotten: the deeper page does not have it either, so it is taken again
    stack.call("DELETE", f"/api/me/facts/{made[0]['id']}")
    stack.say(agent["id"], "and now?")
    assert "plant number 0" not in json.dumps(bodies[-1]["system"])


def test_after_an_hour_without_a_turn_the_memory_is_ranked_afresh(stack):
    from engram.aws import keys

    bodies: list[dict] = []
    _claude(stack, bodies)
    agent = stack.agent(persona=PERSONA, model=MODEL, agentMemory=True)
    stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "api", "value": "the API runs on port 8080"})
    stack.say(agent["id"], "hi")
    stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "db", "value": "the db runs on port 5432"})
    stack.say(agent["id"], "and the db?")
    assert "5432" not in json.dumps(bodies[-1]["system"]) and "5432" in json.dumps(bodies[-1]["messages"][-1])
    session = (keys.agent_pk(tenant_key("alice"), agent["id"]), keys.session_sk("dashboard"))
    stack.deps.table.set_fields(*session, {"updatedAt": "2020-01-01T00:00:00.000Z"})  # two hours and more ago
    stack.say(agent["id"], "back again")
    # nothing of the session is cached after an hour: the memory is taken again, the row with it
    system, own = json.dumps(bodies[-1]["system"]), json.dumps(bodies[-1]["messages"][-1])
    assert "the db runs on port 5432" in system and "5432" not in own
    stack.say(agent["id"], "and now?")  # ...and kept from then on
    assert json.dumps(bodies[-1]["system"]) == system


def test_a_heartbeat_every_15_minutes_caches_for_an_hour_and_chat_for_five_minutes(stack):
    bodies: list[dict] = []
    _claude(stack, bodies)
    agent = stack.agent(persona=PERSONA, model=MODEL, activeMemory=True, schedule="rate(15 minutes)", defaultPrompt="Check in.")
    stack.say(agent["id"], "hello")
    chat = bodies[-1]
    assert _markers(chat) and all(m == {"type": "ephemeral"} for m in _markers(chat))
    stack.fire(agent["id"])
    beat = bodies[-1]
    assert _markers(beat) and all(m == {"type": "ephemeral", "ttl": "1h"} for m in _markers(beat))
    assert len(_markers(beat)) <= 4
    # the heartbeat on the shared session sends the chat's tools and system, so its request
    # extends the chat's cached prefix
    assert beat["tools"] == chat["tools"]
    assert [b["text"] for b in beat["system"]] == [b["text"] for b in chat["system"]]


def test_sections_stay_within_their_budget_at_10000_rows_and_recall_finds_the_rest(stack):
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data
    agent = stack.agent(workspaceId=ws["id"], agentMemory=True)
    deps, t = stack.deps, tenant_key("alice")
    from engram.facts.models import Fact
    from engram.kernel.model import now_iso
    from engram.memory.models import Memory

    now = now_iso()
    items = []
    for i in range(10_000):
        for scope, owner in (("agent", agent["id"]), ("workspace", ws["id"])):
            m = Memory(
                id=f"m_{scope}{i}",
                created_at=now,
                updated_at=now,
                key=f"{scope}-{i}",
                scope=scope,
                value=f"{scope} row {i}: host h{i} answers on port {10000 + i}",
                importance=i % 90,
            )
            items.append(deps.memories.item(t, m, owner))
        fact = Fact(id=f"f_{i}", created_at=now, updated_at=now, fact=f"user fact {i} about tea", last_referenced_at=now)
        items.append(deps.facts.item(t, fact))
    deps.table.batch_write(puts=items)

    bodies: list[dict] = []
    _claude(stack, bodies)
    stack.say(agent["id"], "hello")
    memory = bodies[-1]["system"][1]["text"]
    assert (len(memory) + 3) // 4 <= deps.settings.memory_sections_token_budget
    assert memory.count("more are reachable with memory_recall") == 3
    shown = {line for line in memory.splitlines() if line.startswith("- ")}
    missing = next(i for i in range(10_000) if f'"workspace-{i}"' not in memory)
    assert len(shown) < 200

    stack.deps.provider_override = None  # the offline model calls memory_recall
    recalled = stack.say(agent["id"], f"what do you remember about h{missing}?")
    call = recalled.data["toolCalls"][0]
    assert call["name"] == "memory_recall"
    assert any(hit.get("key") == f"workspace-{missing}" for hit in call["result"])


class _ChatsToClaude:
    """Chat turns to the anthropic client over the recording transport; the workers' forced tool
    calls (extraction, the summary) to the offline model."""

    name = "anthropic"

    def __init__(self, claude_provider, offline):
        self.claude, self.offline = claude_provider, offline

    def complete(self, **kw):
        forced = (kw.get("tool_choice") or {}).get("type") == "tool"
        return (self.offline if forced else self.claude).complete(**kw)


def _cutting_stack(stack) -> list[dict]:
    """A history cap of 8 (a cut every few turns), chats to Claude's client: the requests sent."""
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 8})
    bodies: list[dict] = []
    offline = stack.deps.provider
    _claude(stack, bodies)
    stack.deps.provider_override = _ChatsToClaude(stack.deps.provider_override, offline)
    return bodies


def _clean(blocks):
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def test_a_cut_turn_reads_tools_persona_memory_and_the_earlier_summary_from_the_cache(stack):
    from local.workers import Workers

    bodies = _cutting_stack(stack)
    agent = stack.agent(persona=PERSONA, model=MODEL, agentMemory=True, activeMemory=True)
    for i in range(30):
        value = {"key": f"host-{i}", "value": f"host {i} serves the legacy API on port {7000 + i}"}
        stack.call("POST", f"/api/agents/{agent['id']}/memories", body=value)
    turns: list[list[dict]] = []
    for i in range(16):
        start = len(bodies)
        assert stack.say(agent["id"], f"Turn {i}: what is on host {i % 6}?").status == 200
        turns.append(bodies[start:])
        Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
        if i == 6:  # a row stored mid-conversation: shown after the user's words, the snapshot kept at the cut
            stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "db", "value": "the db is on 5432"})
    cuts = [n for n in range(1, len(turns)) if turns[n][0]["messages"][0] != turns[n - 1][-1]["messages"][0]]
    assert len(cuts) >= 3
    summarised = [n for n in cuts if any("Earlier in this conversation" in b["text"] for b in turns[n - 1][-1]["system"])]
    assert summarised  # a cut after the first: a summary was sent before it
    for n in summarised:
        before, cut = turns[n - 1][-1], turns[n][0]
        assert cut["tools"] == before["tools"]
        # the system blocks sent before the cut (persona, memory, summary) open the cut turn's,
        # byte for byte: the memory stored since the last cut (if any) gained a block of its own
        # after them, and the summary one more for its new fold, last
        kept = _clean(before["system"])
        assert _clean(cut["system"])[: len(kept)] == kept
        new = cut["system"][len(kept) :]
        fold = new[-1]["text"]
        assert fold.startswith('<memory scope="summary">') and "Earlier in this conversation" not in fold
        assert len(new) <= 2 and all(b["text"].startswith(ADDED_HEADING) for b in new[:-1])
        # the turn before marked the end of its system prompt, and the cut turn marks its new last
        # block: the API's lookback (20 blocks) finds the entry written before the cut
        assert "cache_control" in before["system"][-1] and "cache_control" in cut["system"][-1]
        assert len([b for b in cut["system"] if "cache_control" in b]) >= 2  # the memory's marker too
    # the memory row stored mid-conversation did not take the memory block again at the cuts
    memory_blocks = {turn[0]["system"][1]["text"] for turn in turns}
    assert len(memory_blocks) == 1 and "5432" not in memory_blocks.pop()
    # ...it is shown after the user's words until the next cut, then in a system block of its own
    # in front of the summary's new fold, on every later turn, and never in both places
    row = '"the db is on 5432"'
    joined = min(n for n in cuts if n > 7)
    for n in range(7, len(turns)):
        own = turns[n][0]["messages"][-1]["content"][-1]["text"]
        system = [b["text"] for b in turns[n][0]["system"]]
        in_system = any(row in text and text.startswith(ADDED_HEADING) for text in system)
        assert (row in own, in_system) == ((False, True) if n >= joined else (True, False)), n


def test_a_summary_that_lands_after_the_cut_turn_leaves_the_system_prompt_as_it_was_until_the_next_cut(stack):
    from local.workers import Workers

    bodies = _cutting_stack(stack)
    agent = stack.agent(persona=PERSONA, model=MODEL)

    def say(i: int) -> dict:
        start = len(bodies)
        assert stack.say(agent["id"], f"Turn {i}: the colour is c{i}.").status == 200
        return bodies[start]

    def trimmed() -> int:
        return stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["trimmedCount"]

    def drain() -> None:
        Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)

    i, cut_seen = 0, 0
    while cut_seen < 1:  # up to the first cut, the summary folded at once
        say(i)
        i, cut_seen = i + 1, trimmed()
        drain()
    while trimmed() == cut_seen:  # up to the turn whose save cuts again
        say(i)
        i += 1
    # its summary job waits: the next turn (the cut turn) sends the summary it has, one fold
    cut = say(i)
    assert len([b for b in cut["system"] if '<memory scope="summary">' in b["text"]]) == 1
    drain()  # the fold lands now, after the cut turn
    after = say(i + 1)
    # the system prompt is the cut turn's, byte for byte, so its cached history is read
    assert _clean(after["system"]) == _clean(cut["system"]) and after["tools"] == cut["tools"]
    assert _clean(after["messages"][0]["content"]) == _clean(cut["messages"][0]["content"])  # the same history start
    # the new fold is after the user's words, after their marker, sent but never stored
    words, late = after["messages"][-1]["content"]
    assert words["text"] == f"Turn {i + 1}: the colour is c{i + 1}." and "cache_control" in words
    assert "cache_control" not in late and late["text"].startswith("## Earlier in this conversation, summarised since")
    assert '<memory scope="summary">' in late["text"] and late["text"].rstrip().endswith("</memory>")
    stored = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"]
    assert all("summarised since" not in json.dumps(m) for m in stored)
    # the next cut puts it in the system prompt, a block of its own after the first
    cuts = trimmed()
    j = i + 2
    while trimmed() == cuts:
        say(j)
        j += 1
        drain()
    nxt = say(j)
    blocks = [b["text"] for b in nxt["system"] if '<memory scope="summary">' in b["text"]]
    assert len(blocks) >= 2 and blocks[1] in late["text"]
    assert all("summarised since" not in b["text"] for b in nxt["messages"][-1]["content"])


def _agent_rows(stack, agent_id, rows):
    """(key, value, importance) rows stored as the repository writes them, in one batch."""
    from engram.kernel.model import now_iso
    from engram.memory.models import Memory, memory_id

    now, t = now_iso(), tenant_key("alice")
    items = [
        stack.deps.memories.item(
            t,
            Memory(
                id=memory_id("agent", agent_id, key),
                key=key,
                value=value,
                scope="agent",
                importance=imp,
                created_at=now,
                updated_at=now,
            ),
            agent_id,
        )
        for key, value, imp in rows
    ]
    stack.deps.table.batch_write(puts=items)


def test_agent_rows_ranked_past_what_the_section_reads_by_newer_ones_keep_the_snapshot(stack):
    """The agent's rows are read until they hold more than the section can show (here a 200-token
    budget: the first page). Rows stored since push the snapshot's rows past that read: not
    forgotten, so the deeper page finds them and the snapshot stays; a forgotten one is not."""
    from engram.memory.models import memory_id
    from engram.memory.section import memory_sections

    stack.deps.settings = stack.deps.settings.model_copy(update={"agent_memory_token_budget": 200})
    stack.deps.sections = memory_sections(200)
    bodies: list[dict] = []
    _claude(stack, bodies)
    agent = stack.agent(persona=PERSONA, model=MODEL, agentMemory=True)
    _agent_rows(stack, agent["id"], [(f"door-{i}", f"the door number {i} is painted blue", 50) for i in range(30)])
    stack.say(agent["id"], "hi")
    snapshot = bodies[-1]["system"][1]["text"]
    assert "more are reachable with memory_recall" in snapshot
    shown = snapshot.split('<memory scope="agent">')[1].split('"')[1]  # the first row shown
    _agent_rows(stack, agent["id"], [(f"window-{i}", f"window number {i} faces the yard", 90) for i in range(80)])
    stack.say(agent["id"], "what do you know?")
    assert bodies[-1]["system"][1]["text"] == snapshot  # kept: its cached prefix survives
    since = bodies[-1]["messages"][-1]["content"][-1]["text"]
    assert since.startswith("## Memory stored since") and '"window-' in since
    door = memory_id("agent", agent["id"], shown)
    assert stack.call("DELETE", f"/api/agents/{agent['id']}/memories/{door}").data["deleted"]
    stack.say(agent["id"], "and now?")
    assert f'\\"{shown}\\"' not in json.dumps(bodies[-1]["system"])  # taken again: the ranking is the new one
    assert '"window-' in bodies[-1]["system"][1]["text"]


def test_the_agent_section_reads_what_it_may_show_and_shows_what_the_whole_page_shows(stack):
    """Rows of every length: the rows read are a prefix of the 200-row page, fewer of them, and the
    section shows the same rows as from the whole page at every budget up to the agent's."""
    from engram.engine.tools import ToolContext
    from engram.memory.section import load_agent_memory, render_agent_memory

    agent = stack.agent(agentMemory=True)
    _agent_rows(stack, agent["id"], [(f"k{i:03d}", "x" * (10 + (i * 37) % 300), i % 100) for i in range(400)])
    model = stack.deps.agents.get(tenant_key("alice"), agent["id"])
    ctx = ToolContext(tenant_key("alice"), model, "dashboard", "run_1", stack.deps)
    budget = stack.deps.settings.agent_memory_token_budget
    read = load_agent_memory(ctx, budget_tokens=budget)
    whole = load_agent_memory(ctx, budget_tokens=budget, deep=True)
    assert len(whole) == 200 and 0 < len(read) < 200 and [m.key for m in read] == [m.key for m in whole[: len(read)]]
    for tokens in (120, 300, 900, budget):
        shown = [line for line in (render_agent_memory(read, tokens) or "").splitlines() if line.startswith("- ")]
        assert shown == [line for line in (render_agent_memory(whole, tokens) or "").splitlines() if line.startswith("- ")]
        assert "At least" in (render_agent_memory(read, tokens) or "")  # more are stored than were read
