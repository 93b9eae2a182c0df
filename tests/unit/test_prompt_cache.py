"""Prompt cache markers, their TTLs and what cache writes cost (engine.cache, engine.pricing)."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest

from engram.agents.models import Agent
from engram.conversations.context import session_context
from engram.conversations.models import RunningSummary, StoredSnapshot
from engram.conversations.snapshot import ADDED_HEADING, session_memory
from engram.engine.cache import (
    DEFAULT_MIN_TOKENS,
    CachePolicy,
    heartbeat_ttl,
    mark,
    min_cacheable_tokens,
)
from engram.engine.pricing import cost_usd, usage_of
from engram.engine.prompt import DELTA_HEADING, MemoryView
from engram.engine.providers.anthropic_provider import BedrockProvider
from engram.engine.trim import trim_in_steps
from engram.kernel.settings import Settings
from engram.runs.execution import run_cache_policy
from engram.runs.models import Run
from tests.fakes import claude

NOW = "2026-01-01T00:00:00Z"
MODEL = "claude-sonnet-4-6"
TOOLS = [{"name": "t", "description": "d" * 400, "input_schema": {"type": "object"}}]  # ~100 tokens


def _text(chars: int) -> dict:
    return {"type": "text", "text": "x" * chars}


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _markers(system, messages):
    return [b["cache_control"] for b in system if "cache_control" in b] + [
        b["cache_control"] for m in messages for b in m["content"] if "cache_control" in b
    ]


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5-20250929", 1024),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 1024),
        ("claude-sonnet-4-20250514", 1024),
        ("claude-opus-4-1-20250805", 1024),
        ("claude-sonnet-4-6", 2048),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-opus-4-6", 4096),
        ("some-new-model", DEFAULT_MIN_TOKENS),
        ("offline", DEFAULT_MIN_TOKENS),
    ],
)
def test_minimum_cacheable_prompt_by_model_family(model, minimum):
    assert min_cacheable_tokens(model) == minimum


def test_no_marker_on_a_prefix_shorter_than_the_models_minimum():
    system = [_text(400), _text(400)]  # persona and memory: far below 1,024 tokens
    out_system, out_messages, placed = mark("claude-sonnet-4-5", TOOLS, system, [_user("hi")], turn_start=0, policy=CachePolicy())
    assert placed == [] and _markers(out_system, out_messages) == []


def test_markers_only_where_the_prefix_is_long_enough_and_never_more_than_four():
    system = [_text(2_000), _text(6_000)]  # persona under 1,024 tokens with the tools; memory past it
    history = [_user("a" * 4_000), {"role": "assistant", "content": [_text(400)]}]
    turn = {"role": "user", "content": [{"type": "text", "text": "now"}, {"type": "text", "text": "since: y"}]}
    tool_round = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "r" * 100}]},
    ]
    messages = [*history, turn, *tool_round]
    out_system, out_messages, placed = mark(
        "claude-sonnet-4-5", TOOLS, system, messages, turn_start=2, stable_blocks=1, policy=CachePolicy()
    )
    assert [p.where for p in placed] == ["memory", "turn", "newest"]  # the persona prefix is too short
    assert len(placed) <= 4 and all(p.tokens >= 1024 for p in placed)
    assert "cache_control" not in out_system[0] and out_system[1]["cache_control"] == {"type": "ephemeral"}
    # the user's words carry the marker; the memory stored since follows it, uncached
    assert out_messages[2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in out_messages[2]["content"][1]
    assert out_messages[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in b for m in messages for b in m["content"])  # the input is untouched
    # however long the prompt, four at most
    _, _, many = mark("claude-sonnet-4-5", TOOLS, [_text(9_000)] * 4, messages, turn_start=2, memory_index=1)
    assert len(many) <= 4


def test_the_summarys_last_block_is_marked_and_in_a_tool_round_the_earliest_marker_gives_way():
    # persona, memory, two summary folds: the marker goes on the summary's last block, the end of
    # what a cut leaves in place (the fold before it was the last block, marked, before the cut)
    system = [_text(6_000), _text(6_000), _text(800), _text(800)]
    turn = _user("now")
    out_system, _, placed = mark("claude-sonnet-4-5", TOOLS, system, [turn], turn_start=0, memory_index=1, summary_index=3)
    assert [p.where for p in placed] == ["persona", "memory", "summary", "turn"]
    assert ["cache_control" in b for b in out_system] == [True, True, False, True]
    # a tool round wants a fifth (the newest message): the persona's gives way, the rest stay
    tool_round = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "r"}]},
    ]
    out_system, out_messages, placed = mark(
        "claude-sonnet-4-5", TOOLS, system, [turn, *tool_round], turn_start=0, memory_index=1, summary_index=3
    )
    assert [p.where for p in placed] == ["memory", "summary", "turn", "newest"]
    assert "cache_control" not in out_system[0] and len(_markers(out_system, out_messages)) == 4
    # without a summary the memory block keeps its marker as before
    _, _, placed = mark("claude-sonnet-4-5", TOOLS, system[:2], [turn], turn_start=0, memory_index=1)
    assert [p.where for p in placed] == ["persona", "memory", "turn"]


def test_the_summary_renders_one_fenced_block_for_each_fold():
    from engram.conversations.summaries.view import SUMMARY_HEADING, render_summary

    one = render_summary(RunningSummary.of({"text": "a said x\nb did y", "parts": [2]}))
    two = render_summary(RunningSummary.of({"text": "a said x\nb did y\nc found z", "parts": [2, 1]}))
    assert len(one) == 1 and one[0].startswith(SUMMARY_HEADING)
    # a fold appended: the earlier block stays byte for byte, the new lines are a fence of their own
    assert two[0] == one[0] and two[1] == '<memory scope="summary">\n- "c found z"\n</memory>'
    # parts that do not add up (or none, as stored before folds were counted): one block
    assert render_summary(RunningSummary.of({"text": "a said x\nb did y\nc found z", "parts": [2]})) == render_summary(
        RunningSummary.of({"text": "a said x\nb did y\nc found z"})
    )
    assert render_summary(RunningSummary.of({"text": "a\nb", "parts": ["1", 1]})) == render_summary(RunningSummary("a\nb"))
    assert len(render_summary(RunningSummary.of({"text": "a\nb\nc"}))) == 1 and render_summary(
        RunningSummary.of({"text": " "})
    ) == [] == render_summary(None)


@pytest.mark.parametrize(
    ("interval", "ttl"),
    [
        (None, "5m"),
        (timedelta(minutes=1), "5m"),
        (timedelta(minutes=5), "5m"),  # the 5-minute entry is refreshed by each heartbeat
        (timedelta(minutes=6), "1h"),
        (timedelta(minutes=15), "1h"),
        (timedelta(minutes=59), "1h"),
        (timedelta(hours=1), "5m"),  # a 1-hour entry would expire too: 2x a write, every time
        (timedelta(hours=6), "5m"),
    ],
)
def test_heartbeat_ttl_follows_the_interval(interval, ttl):
    assert heartbeat_ttl(interval) == ttl


def _run(kind: str) -> Run:
    return Run(id="run_1", created_at=NOW, updated_at=NOW, agent_id="ag_1", status="running", prompt="p", kind=kind)


def test_a_long_interval_heartbeat_caches_for_an_hour_and_chat_for_five_minutes():
    agent = Agent(id="ag_1", created_at=NOW, updated_at=NOW, name="A", model="m", schedule="rate(15 minutes)")
    shared = run_cache_policy(agent, _run("heartbeat"), shared=True)
    assert (shared.prefix_ttl, shared.history_ttl) == ("1h", "1h")
    alone = run_cache_policy(agent, _run("heartbeat"), shared=False)
    assert (alone.prefix_ttl, alone.history_ttl) == ("1h", "5m")  # a clean slate's messages never recur
    assert run_cache_policy(agent, _run("manual"), shared=True) == CachePolicy()
    frequent = agent.model_copy(update={"schedule": "rate(2 minutes)"})
    assert run_cache_policy(frequent, _run("heartbeat"), shared=True) == CachePolicy()
    assert CachePolicy().marker("5m") == {"type": "ephemeral"}
    assert CachePolicy().marker("1h") == {"type": "ephemeral", "ttl": "1h"}
    # longer TTLs come first in a request, as the API requires
    system = [_text(8_000)]
    out_system, out_messages, _ = mark("claude-sonnet-4-5", TOOLS, system, [_user("y" * 5_000)], turn_start=0, policy=alone)
    assert [m.get("ttl", "5m") for m in _markers(out_system, out_messages)] == ["1h", "5m"]


def test_cost_of_one_hour_cache_writes():
    # Sonnet: input $3, 5-minute write $3.75 (1.25x), 1-hour write $6 (2x), read $0.30 (0.1x) per million
    five = cost_usd("claude-sonnet-4-5", input_tokens=0, output_tokens=0, cache_read_tokens=0, cache_write_tokens=1_000_000)
    hour = cost_usd(
        "claude-sonnet-4-5",
        input_tokens=0,
        output_tokens=0,
        cache_read_tokens=0,
        cache_write_tokens=1_000_000,
        cache_write_1h_tokens=1_000_000,
    )
    mixed = cost_usd(
        "claude-sonnet-4-5",
        input_tokens=100,
        output_tokens=10,
        cache_read_tokens=1_000,
        cache_write_tokens=3_000,
        cache_write_1h_tokens=2_000,
    )
    assert (five, hour) == (3.75, 6.0)
    assert mixed == round((100 * 3 + 10 * 15 + 1_000 * 0.30 + 1_000 * 3.75 + 2_000 * 6) / 1_000_000, 8)


def test_usage_reports_one_hour_writes_through_the_sdk():
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 3_000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000},
    }
    answer = claude.reply([{"type": "text", "text": "ok"}], **usage)
    settings = Settings.model_validate({"ANTHROPIC_API_KEY": "sk-test"})
    provider = claude.provider(settings, claude.recording([], lambda _body: answer))
    response = provider.complete(model=MODEL, system=[], tools=[], messages=[_user("hi")], max_tokens=10, timeout=5)
    assert (response.tokens.cache_write_tokens, response.tokens.cache_write_1h_tokens) == (3_000, 2_000)
    assert usage_of(response).cost_usd == round((10 * 3 + 5 * 15 + 1_000 * 3.75 + 2_000 * 6) / 1_000_000, 8)


def test_bedrock_keeps_the_one_hour_ttl_only_where_aws_offers_it():
    seen: list[dict] = []
    answer = claude.reply([{"type": "text", "text": "ok"}])
    settings = Settings.model_validate({"MODEL_PROVIDER": "bedrock"})
    provider = claude.provider(settings, claude.recording(seen, lambda _body: answer), BedrockProvider)
    marked = {"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    message = {"role": "user", "content": [{**marked, "text": "hi"}]}
    for model in ("claude-sonnet-4-5-20250929", "claude-sonnet-4-20250514"):
        provider.complete(model=model, system=[marked], tools=[], messages=[message], max_tokens=10, timeout=5)
    supported, older = seen
    assert supported["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert older["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert older["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_history_past_the_cap_is_cut_to_about_half_so_the_first_message_moves_rarely():
    turns = [m for i in range(30) for m in (_user(f"q{i}"), {"role": "assistant", "content": [_text(5)]})]
    assert trim_in_steps(turns[:50], 50).kept == turns[:50]
    cut = trim_in_steps(turns[:52], 50).kept
    assert len(cut) == 26 and cut[0] == turns[26]  # never less than half (CM8), from a turn's start
    firsts = set()
    history: list[dict] = []
    for message in turns * 3:
        history = trim_in_steps([*history, message], 50).kept
        firsts.add(json.dumps(history[0]))
    assert len(firsts) <= 1 + (len(turns) * 3) // 24  # not one new first message per turn


def _view(*entries: str) -> MemoryView:
    text = "\n".join(e.split("|", 1)[1] for e in entries)
    return MemoryView(text=text, shown=list(entries), known=set(entries))


def test_the_memory_snapshot_is_kept_while_its_rows_stand_and_taken_again_when_not():
    old = _view('agent|- "a": "1"', 'user|- "tea" (fact f_1)')
    snapshot = session_memory(old, None, "h1", budget_tokens=2_000).store
    assert snapshot is not None
    stored = snapshot.stored()
    # the session row holds digests and a template, none of the stored text
    assert '"1"' not in json.dumps(stored.item()) and "tea" not in json.dumps(stored.item())
    # a row stored since: same system text, the row shown after it
    grown = _view('agent|- "a": "1"', 'agent|- "b": "2"', 'user|- "tea" (fact f_1)')
    memory = session_memory(grown, stored, "h1", budget_tokens=2_000)
    assert (memory.text, memory.added, memory.store) == (snapshot.text, (), None)
    assert memory.delta.startswith(DELTA_HEADING) and '- "b": "2"' in memory.delta and '"a"' not in memory.delta
    # a section whose read failed (so its rows are not in the view) cannot rebuild them: taken again
    memory = session_memory(_view('agent|- "a": "1"'), stored, "h1", budget_tokens=2_000)
    assert memory.store is not None and "tea" not in memory.text
    # a snapshot stored as text (before digests) is taken again, and stored without its text
    legacy = StoredSnapshot.of({"text": snapshot.text, "lines": snapshot.lines, "head": "h1"})
    again = session_memory(old, legacy, "h1", budget_tokens=2_000).store
    assert again is not None and "tea" not in json.dumps(again.stored().item())
    # a forgotten row: taken again, without it
    memory = session_memory(_view('agent|- "a": "1"'), stored, "h1", budget_tokens=2_000)
    assert memory.store is not None and "tea" not in memory.text and memory.delta == ""
    # the history's head moved (a cut), and the rows stored since fit beside the snapshot: they
    # join the system prompt as a block after what is there; the snapshot stays
    memory = session_memory(grown, stored, "h2", budget_tokens=70, position=10, until_cut=1, summary_parts=3)
    assert memory.text == snapshot.text and memory.delta == ""
    [block] = memory.added
    assert block.after == 3 and block.text.startswith(ADDED_HEADING) and '- "b": "2"' in block.text and '"a"' not in block.text
    kept = memory.store
    assert kept is not None and (kept.text, kept.head, kept.at) == (snapshot.text, "h2", 0)
    # a head that moved with nothing stored since: the same text, the new head stored
    moved = session_memory(old, stored, "h2", budget_tokens=2_000)
    assert moved.store is not None and moved.text == snapshot.text and moved.added == () and moved.store.head == "h2"
    # more rows than the budget holds beside the snapshot: they wait (a search finds them), the
    # snapshot and the cached prefix stay
    tight = session_memory(grown, stored, "h1", budget_tokens=20)
    assert (tight.text, tight.delta, tight.store) == (snapshot.text, "", None)
    # an hour without a turn: nothing is cached any more, so the memory is ranked afresh
    cold = session_memory(grown, stored, "h1", budget_tokens=2_000, idle_s=3_600)
    assert cold.store is not None and cold.text == grown.text and cold.delta == ""
    assert session_memory(grown, stored, "h1", budget_tokens=2_000, idle_s=3_599).store is None


def test_the_session_row_keeps_a_short_digest_a_row_and_still_reads_the_long_ones_stored_before():
    rows = [f'agent|- "k{i:03d}": "value {i}"' for i in range(90)]
    stored = session_memory(_view(*rows), None, "h1", budget_tokens=20_000).store.stored()
    assert {len(d) for d in stored.block.digests} == {16}  # 64 bits a row (they were 32 hex digits)
    # a row written with 32-character digests: rebuilt from the same rows, not taken again
    before = {**stored.item(), "digests": [hashlib.sha256(line.encode()).hexdigest()[:32] for line in rows]}
    memory = session_memory(_view(*rows), StoredSnapshot.of(before), "h1", budget_tokens=20_000)
    assert memory.store is None and memory.text == _view(*rows).text


def test_memory_added_at_cuts_stays_byte_identical_in_order_until_a_row_of_it_is_forgotten():
    start = _view('agent|- "a": "1"')
    stored = session_memory(start, None, "h1", budget_tokens=2_000).store.stored()
    # cut 1 (two summary parts shown): "b" joins the system prompt
    one = _view('agent|- "a": "1"', 'agent|- "b": "beta"')
    first = session_memory(one, stored, "h2", budget_tokens=2_000, position=30, until_cut=20, summary_parts=2)
    stored = first.store.stored()
    assert "beta" not in json.dumps(stored.item())  # digests and a template only
    # turns between cuts: the same blocks, byte for byte; a row stored since follows the user's words
    two = _view('agent|- "a": "1"', 'agent|- "b": "beta"', 'user|- "tea" (fact f_1)')
    between = session_memory(two, stored, "h2", budget_tokens=2_000, position=40, until_cut=20, summary_parts=2)
    assert between.added == first.added and between.store is None and '"tea"' in between.delta
    # cut 2 (a third part shown): "tea" gets a block of its own after the third part
    second = session_memory(two, stored, "h3", budget_tokens=2_000, position=56, until_cut=20, summary_parts=3)
    assert second.added[0] == first.added[0] and second.added[1].after == 3 and '"tea"' in second.added[1].text
    assert second.delta == ""
    blocks = session_context(["S0", "S1", "S2"], second.added)
    assert blocks == ["S0", "S1", first.added[0].text, "S2", second.added[1].text]
    # the summary condensed since to one part: the blocks follow it, in the order they were added
    assert session_context(["S"], second.added) == ["S", first.added[0].text, second.added[1].text]
    assert session_context([], second.added) == [first.added[0].text, second.added[1].text]
    # a row of an added block forgotten: the whole memory is taken again, nothing of it kept
    forgot = _view('agent|- "a": "1"', 'user|- "tea" (fact f_1)')
    retaken = session_memory(forgot, second.store.stored(), "h3", budget_tokens=2_000, position=57)
    assert retaken.added == () and retaken.store is not None and retaken.store.added == () and '"b"' not in retaken.text


def test_rows_that_outgrow_their_room_compete_for_it_at_a_cut_and_the_snapshot_stays():
    start = _view('agent|- "a": "1"')
    budget = 200
    stored = session_memory(start, None, "h1", budget_tokens=budget).store.stored()
    # two cuts, each adding rows stored since
    agent_rows = [f'agent|- "n{i}": "{"x" * 60}{i}"' for i in range(4)]
    user_rows = [f'user|- "fact {i} {"y" * 60}" (fact f_{i})' for i in range(4)]
    first = session_memory(
        _view('agent|- "a": "1"', *agent_rows[:1], *user_rows[:1]),
        stored,
        "h2",
        budget_tokens=budget,
        position=20,
        until_cut=1,
        summary_parts=1,
    )
    assert len(first.added) == 1 and first.delta == ""
    # between cuts, more than the room holds: the highest ranked of each section follow the user's
    # words (a section's first rows are its best), the rest wait; nothing is taken again
    view = _view('agent|- "a": "1"', *agent_rows, *user_rows)
    between = session_memory(view, first.store.stored(), "h2", budget_tokens=budget, position=30, until_cut=1)
    assert between.store is None and between.added == first.added
    assert agent_rows[1].split("|")[1] in between.delta and user_rows[1].split("|")[1] in between.delta
    assert agent_rows[3].split("|")[1] not in between.delta
    # the next cut: they no longer fit beside the first block, so the session's rows compete for
    # the room; the first block's rows (the best of each section) still win theirs, so it stays
    # byte for byte, and the next best follow in one block after the summary's parts; the
    # snapshot text is unchanged
    cut = session_memory(view, first.store.stored(), "h3", budget_tokens=budget, position=40, until_cut=1, summary_parts=2)
    assert cut.text == first.text and cut.store is not None and cut.store.text == first.store.text
    kept, added = cut.added
    assert kept == first.added[0]
    block = kept.text + added.text
    assert added.after == 2 and added.text.startswith(ADDED_HEADING)
    assert agent_rows[0].split("|")[1] in kept.text and user_rows[0].split("|")[1] in kept.text  # the best of each section
    assert agent_rows[1].split("|")[1] in added.text or user_rows[1].split("|")[1] in added.text
    assert len(kept.text) // 4 + len(added.text) // 4 + len(cut.text) // 4 <= budget
    # a block whose rows the sections no longer show on the whole budget goes, and what follows
    # it: the session's rows compete for the room in one block
    better = [f'agent|- "top{i}": "{"z" * 60}{i}"' for i in range(8)]
    ranked = session_memory(
        _view('agent|- "a": "1"', *better, *agent_rows, *user_rows),
        first.store.stored(),
        "h3",
        budget_tokens=budget,
        position=40,
        until_cut=1,
        summary_parts=2,
        ranked=lambda: {'agent|- "a": "1"', *better, *user_rows},
    )
    [only] = ranked.added
    assert only.after == 2 and better[0].split("|")[1] in only.text and agent_rows[0].split("|")[1] not in only.text
    # what the block left out follows the user's words while the room lasts, never both
    for entry in [*agent_rows, *user_rows]:
        assert not (entry.split("|")[1] in block and entry.split("|")[1] in cut.delta)


def test_a_fold_landing_after_the_cut_turn_waits_after_the_users_words_until_the_next_cut():
    from engram.conversations.summaries.view import LATE_SUMMARY_HEADING, render_summary, session_summary

    before = RunningSummary("a said x\nb did y", (2,))
    landed = RunningSummary("a said x\nb did y\nc found z", (2, 1))
    # the cut turn (a new first message) sends the summary as it is, and says what it sent
    cut = session_summary(before, None, "h2")
    assert cut.system == render_summary(before) and cut.late == "" and cut.shown is not None
    assert "a said x" not in json.dumps(cut.shown.item())  # digests, never the text
    # the fold lands before the next turn: the system blocks stay, the new part follows the user's words
    late = session_summary(landed, cut.shown, "h2")
    assert late.system == cut.system and late.shown is None
    assert late.late.startswith(LATE_SUMMARY_HEADING) and '- "c found z"' in late.late and "a said x" not in late.late
    # the next cut sends all of it in the system prompt
    nxt = session_summary(landed, cut.shown, "h3")
    assert nxt.system == render_summary(landed) and nxt.late == "" and nxt.shown.parts == 2
    # nothing changed: nothing to store
    assert session_summary(landed, nxt.shown, "h3") == type(nxt)(nxt.system, kept=len(nxt.system), lasting_opening=True)
    # condensed since (the parts sent cannot be rebuilt): sent as it is now
    condensed = RunningSummary("all of it, shorter", (1,))
    again = session_summary(condensed, cut.shown, "h2")
    assert again.system == render_summary(condensed) and again.late == "" and again.shown.parts == 1


def _two_cuts():
    """A session's memory after two cuts: "b" added after the summary's first part, the fact "tea"
    after its second. The view of the rows, and the memory."""
    start = _view('agent|- "a": "1"')
    stored = session_memory(start, None, "h1", budget_tokens=2_000).store.stored()
    one = _view('agent|- "a": "1"', 'agent|- "b": "beta"')
    first = session_memory(one, stored, "h2", budget_tokens=2_000, position=30, until_cut=20, summary_parts=1)
    two = _view('agent|- "a": "1"', 'agent|- "b": "beta"', 'user|- "tea" (fact f_1)')
    second = session_memory(two, first.store.stored(), "h3", budget_tokens=2_000, position=56, until_cut=20, summary_parts=2)
    assert [b.after for b in second.added] == [1, 2]
    return two, second


def test_a_summary_written_anew_leaves_the_memory_blocks_in_front_of_it_and_cached():
    from engram.conversations.summaries.view import session_summary

    two, second = _two_cuts()
    assert session_context(["S0", "S1"], second.added) == ["S0", second.added[0].text, "S1", second.added[1].text]
    # the summary grew by a fold: its blocks extend those shown; condensed: they replace them
    parts = RunningSummary("x\ny", (1, 1))
    shown = session_summary(parts, None, "h3").shown
    assert session_summary(RunningSummary("x\ny\nz", (1, 1, 1)), shown, "h4").kept == 2
    condensed = session_summary(RunningSummary("xy, shorter"), shown, "h4")
    assert condensed.kept == 0 and condensed.shown is not None
    # at the cut that shows the condensed summary, the memory blocks move in front of it, in their
    # order, and a block of the rows stored since follows it
    three = _view('agent|- "a": "1"', 'agent|- "b": "beta"', 'user|- "tea" (fact f_1)', 'agent|- "c": "gamma"')
    moved = session_memory(
        three,
        second.store.stored(),
        "h4",
        budget_tokens=2_000,
        position=80,
        until_cut=20,
        summary_parts=0,
    )
    assert [(b.text, b.after) for b in moved.added[:2]] == [(b.text, 0) for b in second.added]
    assert moved.added[2].after == 0 and '"gamma"' in moved.added[2].text
    blocks = session_context(["C"], moved.added)
    assert blocks == [second.added[0].text, second.added[1].text, moved.added[2].text, "C"]
    # the next rewrite of the summary leaves them where they are, byte for byte
    again = session_memory(
        three,
        moved.store.stored(),
        "h5",
        budget_tokens=2_000,
        position=100,
        until_cut=20,
        summary_parts=0,
    )
    assert session_context(["C2"], again.added)[:3] == blocks[:3]


def test_a_condensation_that_keeps_the_opening_moves_only_the_blocks_after_it():
    """Issue 33 item 8: a condensation keeps a short first part; the memory blocks added after it
    stay where they are (cached), those after the parts it rewrote move in front of the new part."""
    from engram.conversations.context import _front
    from engram.conversations.summaries.view import OPENING_MAX_TOKENS, kept_opening, session_summary

    short, rest = ["(label)", "User: the opening"], ["User: later"]
    assert kept_opening([short, rest]) == short
    assert kept_opening([short]) == []  # nothing after it to condense
    assert kept_opening([["x" * (OPENING_MAX_TOKENS * 4 + 4)], rest]) == []  # too long: condensed with the rest
    # shown: opening + two parts; condensed to opening + one part: rewritten from the second part
    shown = session_summary(RunningSummary("o\na\nb", (1, 1, 1)), None, "h1").shown
    view = session_summary(RunningSummary("o\nab", (1, 1)), shown, "h2")
    assert view.kept == 1 and len(view.system) == 2
    assert session_summary(RunningSummary("oab, shorter"), shown, "h2").kept == 0  # the opening went too
    # memory blocks added after the opening (after 1) and after the next part (after 2)
    two, second = _two_cuts()
    moved = session_memory(
        two,
        second.store.stored(),
        "h4",
        budget_tokens=2_000,
        position=80,
        until_cut=20,
        summary_parts=1,
    )
    assert [(b.text, b.after) for b in moved.added] == [(second.added[0].text, 1), (second.added[1].text, 1)]
    blocks = session_context(["O", "C"], moved.added)
    assert blocks == ["O", second.added[0].text, second.added[1].text, "C"]
    # the memory's cache marker goes after what the next condensation keeps: the opening and the blocks after it
    assert _front(2, moved.added, opening=True) == 3
    assert _front(2, moved.added, opening=False) == 0
    assert _front(1, moved.added, opening=True) == 0  # one part: the summary's own marker covers it
