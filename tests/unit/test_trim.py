"""History trimming: within the cap, never splitting a tool round, keeping the newest messages."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.engine.trim import (
    TRIMMED_TURN_NOTICE,
    TrimResult,
    is_turn_start,
    sequence_problems,
    trim_history,
)

NOTICE = {"role": "user", "content": [{"type": "text", "text": TRIMMED_TURN_NOTICE}]}


# ---------------------------------------------------------------- builders


def user(text="hi"):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def say(text="ok"):
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def use(*ids, text=None):
    blocks = [{"type": "text", "text": text}] if text else []
    return {"role": "assistant", "content": blocks + [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in ids]}


def result(*ids):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "r"} for i in ids]}


def tool_turn(prefix, rounds, question="q"):
    """A whole turn: question, `rounds` single-tool rounds, answer (2 + 2*rounds messages)."""
    out = [user(question)]
    for r in range(rounds):
        out += [use(f"{prefix}{r}"), result(f"{prefix}{r}")]
    return out + [say(f"answer {prefix}")]


# ---------------------------------------------------------------- strategy


@st.composite
def conversations(draw):
    """Valid stored histories: whole turns, the last possibly in progress (awaiting the model,
    pending tool_use, or just after a tool_result)."""
    counter = iter(range(10**9))
    n_turns = draw(st.integers(1, 40))
    messages: list[dict] = []
    for t in range(n_turns):
        last = t == n_turns - 1
        ending = draw(st.sampled_from(["complete", "after_user", "after_tool_use", "after_tool_result"])) if last else "complete"
        question = f"question {t}"
        messages.append({"role": "user", "content": question} if draw(st.booleans()) else user(question))
        if ending == "after_user":
            break
        rounds = draw(st.integers(1 if ending != "complete" else 0, 6))
        for r in range(rounds):
            ids = [f"toolu_{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append(use(*ids, text=f"thinking {t}.{r}" if draw(st.booleans()) else None))
            if ending == "after_tool_use" and r == rounds - 1:
                return messages
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": i,
                    "content": [{"type": "text", "text": "out"}],
                    "is_error": draw(st.booleans()),
                }
                for i in ids
            ]
            if draw(st.integers(0, 9)) == 0:
                blocks.append({"type": "text", "text": "(the user also said this)"})
            messages.append({"role": "user", "content": blocks})
        if ending == "after_tool_result":
            return messages
        messages.append(say(f"answer {t}"))
    return messages


caps = st.integers(2, 60)


# ---------------------------------------------------------------- oracle helpers


def tool_ids(messages):
    uses, results = set(), set()
    for m in messages:
        content = m["content"]
        for b in content if isinstance(content, list) else []:
            if b["type"] == "tool_use":
                uses.add(b["id"])
            elif b["type"] == "tool_result":
                results.add(b["tool_use_id"])
    return uses, results


def longest(messages, max_len, ok):
    """Longest suffix length L (1..max_len) with ok(suffix), by brute force; 0 if none."""
    n = len(messages)
    for length in range(min(max_len, n), 0, -1):
        if ok(messages[n - length :]):
            return length
    return 0


def check_trim(messages, cap):
    """Every property trim_history promises, checked against brute force."""
    out = trim_history(messages, cap)
    kept = out.kept
    assert isinstance(out, TrimResult)
    assert len(kept) <= cap

    body = kept[1:] if out.split_turn else kept
    if out.split_turn:
        assert kept[0] == NOTICE
        assert body and body[0]["role"] == "assistant"
    # Nothing lost, nothing reordered: trimmed + kept (without the notice) is the input.
    assert out.trimmed + body == messages
    if body:
        assert body[-1] is messages[-1]  # the newest message always survives

    if kept:
        assert sequence_problems(kept, allow_pending_tool_use=True) == []
        assert kept[0]["role"] == "user" and is_turn_start(kept[0])
        # No pair split: each kept result's tool_use is kept and each kept tool_use's result is kept
        # (unless it is the pending tail of the input, whose result does not exist yet).
        uses, results = tool_ids(kept)
        all_uses, all_results = tool_ids(messages)
        assert results <= uses
        assert uses & all_results <= results

    # Maximality, by brute force over every suffix within the cap.
    plain = longest(messages, cap, lambda s: sequence_problems(s, allow_pending_tool_use=True) == [])
    if plain:
        assert not out.split_turn
        assert len(kept) == plain
    else:
        fallback = longest(
            messages,
            cap - 1,
            lambda s: s[0]["role"] == "assistant" and sequence_problems([NOTICE, *s], allow_pending_tool_use=True) == [],
        )
        if fallback:
            assert out.split_turn
            assert len(body) == fallback
        else:
            assert kept == [] and not out.split_turn
            assert out.trimmed == messages

    # Trimming what was kept changes nothing: stored histories are stable under the cap.
    again = trim_history(kept, cap)
    assert again.kept == kept and again.trimmed == [] and not again.split_turn
    return out


# ---------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), caps)
def test_trim_properties_hold_for_any_history_and_cap(messages, cap):
    check_trim(messages, cap)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations())
def test_generated_histories_are_valid_and_pending_tails_are_reported(messages):
    assert sequence_problems(messages, allow_pending_tool_use=True) == []
    pending = messages[-1]["role"] == "assistant" and any(b["type"] == "tool_use" for b in messages[-1]["content"])
    strict = sequence_problems(messages)
    assert bool(strict) == pending
    if pending:
        assert len(strict) == 1 and "pending" in strict[0]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), caps)
def test_trim_does_not_mutate_its_input(messages, cap):
    snapshot = [dict(m) for m in messages]
    length = len(messages)
    trim_history(messages, cap)
    assert len(messages) == length and messages == snapshot


# ---------------------------------------------------------------- trim examples


def test_history_under_the_cap_is_returned_unchanged():
    history = tool_turn("a", 2) + [user("next"), say("done")]
    out = check_trim(history, 50)
    assert out.kept == history and out.kept is not history
    assert out.trimmed == [] and not out.split_turn


def test_history_exactly_at_the_cap_is_unchanged():
    history = [user("1"), say("1"), user("2"), say("2")]
    out = trim_history(history, 4)
    assert out.kept == history and out.trimmed == []


def test_cap_on_a_turn_boundary_drops_whole_older_turns():
    first, second = tool_turn("a", 1), tool_turn("b", 1)  # 4 messages each
    out = check_trim(first + second, 4)
    assert out.kept == second and out.trimmed == first


def test_cap_one_short_of_a_boundary_falls_back_to_the_turn_before():
    first, second, third = [user("1"), say("1")], tool_turn("b", 1), [user("3"), say("3")]
    # cap 5 would cut into `second`; the longest whole-turn suffix within 5 is `third`.
    out = check_trim(first + second + third, 5)
    assert out.kept == third and out.trimmed == first + second
    out = check_trim(first + second + third, 6)
    assert out.kept == second + third


def test_trim_never_starts_at_a_tool_result():
    history = [user("1"), say("1"), *tool_turn("a", 3)]  # 2 + 8 messages
    out = check_trim(history, 8)
    assert out.kept == history[2:] and not out.split_turn
    # cap 7: no turn starts in the last 7; the notice's 6 slots would begin at a tool_result
    # (index 4), so the kept part begins at the next tool_use instead.
    out = check_trim(history, 7)
    assert out.split_turn
    assert out.kept == [NOTICE, *history[5:]] and out.trimmed == history[:5]


def test_single_turn_longer_than_the_cap_keeps_newest_rounds_behind_a_notice():
    turn = tool_turn("a", 10)  # 22 messages: q, (use, result) x 10, answer
    out = check_trim(turn, 6)
    assert out.split_turn
    # Five slots after the notice: indices 17..21, and 17 is a tool_use, so all five are used.
    assert out.kept == [NOTICE, *turn[17:]]
    assert out.trimmed == turn[:17]
    assert sequence_problems(out.kept) == []


def test_long_turn_in_progress_keeps_the_pending_tool_use():
    turn = tool_turn("a", 10)[:-2]  # ends with the assistant tool_use of round 9, no result yet
    out = check_trim(turn, 4)
    assert out.split_turn
    assert out.kept == [NOTICE, turn[-3], turn[-2], turn[-1]]
    assert sequence_problems(out.kept, allow_pending_tool_use=True) == []


def test_when_no_assistant_message_fits_nothing_is_kept():
    turn = tool_turn("a", 3)[:-1]  # ends with a tool_result
    out = check_trim(turn, 2)  # one slot after the notice holds only that tool_result: unusable
    assert out.kept == [] and out.trimmed == turn and not out.split_turn


def test_empty_history_trims_to_empty():
    out = trim_history([], 4)
    assert out == TrimResult(kept=[], trimmed=[])


def test_notice_is_a_fresh_message_each_time():
    turn = tool_turn("a", 10)
    a, b = trim_history(turn, 4), trim_history(turn, 4)
    a.kept[0]["content"][0]["text"] = "changed"
    assert b.kept[0] == NOTICE


@pytest.mark.parametrize("cap", [1, 0, -3, True, 2.5, "10", None])
def test_cap_below_two_or_not_an_integer_raises(cap):
    with pytest.raises(ValueError):
        trim_history([user(), say()], cap)


# ---------------------------------------------------------------- sequence_problems examples


def only_problem(messages, needle, **kw):
    problems = sequence_problems(messages, **kw)
    assert len(problems) == 1, problems
    assert needle in problems[0], problems
    return problems[0]


def test_a_valid_sequence_has_no_problems():
    messages = [
        {"role": "user", "content": "plain string"},
        use("x1", "x2", text="let me check"),
        {"role": "user", "content": [*result("x1", "x2")["content"], {"type": "text", "text": "also"}]},
        say(),
    ]
    assert sequence_problems(messages) == []


def test_empty_sequence():
    assert sequence_problems([]) == ["the sequence is empty"]


def test_first_message_must_be_user():
    only_problem([say(), user()], "must be a user message")


def test_first_message_must_not_be_a_tool_result():
    only_problem([result("x"), say()], "first message must not carry a tool_result")


def test_roles_must_alternate():
    only_problem([user(), user(), say()], "roles must alternate")
    only_problem([user(), say(), say()], "roles must alternate")


def test_unknown_role():
    problems = sequence_problems([user(), {"role": "system", "content": "x"}])
    assert any("has role 'system'" in p for p in problems)


def test_tool_use_must_be_answered_by_the_next_message():
    only_problem([user(), use("x"), user("no result"), say()], "tool_use x not answered in message 2")


def test_partial_answers_are_reported():
    only_problem([user(), use("x", "y"), result("x"), say()], "tool_use y not answered")


def test_tool_result_must_answer_the_immediately_preceding_assistant():
    # The result names a tool_use that was never made: both the miss and the stray result are reported.
    messages = [user(), use("x"), result("z"), say()]
    problems = sequence_problems(messages)
    assert any("tool_result z answers no tool_use of message 1" in p for p in problems)
    assert any("tool_use x not answered" in p for p in problems)
    assert len(problems) == 2


def test_tool_use_ids_must_be_unique():
    messages = [user(), use("x"), result("x"), say(), user(), use("x"), result("x"), say()]
    problems = sequence_problems(messages)
    assert any("tool_use id x is not unique" in p for p in problems)


def test_duplicate_tool_result():
    only_problem([user(), use("x"), result("x", "x"), say()], "already answered")


def test_tool_results_come_before_other_blocks():
    msg = {"role": "user", "content": [{"type": "text", "text": "first"}, *result("x")["content"]]}
    only_problem([user(), use("x"), msg, say()], "must come before any other block")


def test_blocks_must_be_dicts_of_known_types():
    only_problem([{"role": "user", "content": ["bare string"]}], "is not an object")
    only_problem([{"role": "user", "content": [{"type": "video"}]}], "unknown type 'video'")
    only_problem([{"role": "user", "content": [{"type": "text"}]}], "no text string")


def test_blocks_in_the_wrong_role():
    bad_use = {"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "t", "input": {}}]}
    only_problem([bad_use], "only allowed in assistant messages")
    bad_result = {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}
    only_problem([user(), bad_result], "only allowed in user messages")


def test_tool_use_needs_id_and_name():
    only_problem([user(), {"role": "assistant", "content": [{"type": "tool_use", "name": "t", "input": {}}]}], "has no id")
    only_problem(
        [user(), {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "input": {}}]}],
        "has no name",
        allow_pending_tool_use=True,
    )


def test_malformed_messages_and_content():
    only_problem([user(), "not a message"], "is not an object")
    only_problem([{"role": "user", "content": 42}], "content must be a string or a list")
    only_problem([{"role": "user", "content": []}, say()], "has no content")
    assert sequence_problems([user(), {"role": "assistant", "content": []}]) == []  # an empty final assistant is allowed


def test_pending_tool_use_at_the_end():
    messages = [user(), use("x")]
    only_problem(messages, "ends pending")
    assert sequence_problems(messages, allow_pending_tool_use=True) == []
