"""The session row as turns and the summary worker read and write it (conversations.models)."""

from __future__ import annotations

from engram.conversations.models import RunningSummary, SessionChanges, SessionState, StoredSnapshot, SummaryShown


def test_a_session_row_reads_as_its_state_and_bad_values_read_as_none():
    row = {
        "revision": 7,
        "messageCount": 24,
        "trimmedCount": 26,
        "contextFrom": 3,
        "summaryFrom": 30,
        "lastRunId": "run_1",
        "title": "Ports",
        "leaseOwner": "run_2",
        "runsSinceReset": 4,
        "summary": {"text": "a\nb", "parts": [1, 1], "through": 20, "updatedAt": "t", "model": "m"},
        "summaryShown": {"head": "h", "parts": 2, "digest": "d"},
        "memorySnapshot": {
            "template": "x",
            "digests": ["d1"],
            "head": "h",
            "at": 4,
            "added": [{"template": "y", "digests": [], "after": 1}],
        },
    }
    state = SessionState.of(row)
    assert (state.revision, state.message_count, state.trimmed_count, state.context_from) == (7, 24, 26, 3)
    assert (state.last_run_id, state.title, state.lease_owner, state.counters["runsSinceReset"]) == ("run_1", "Ports", "run_2", 4)
    assert state.summary == RunningSummary("a\nb", (1, 1), 20, "t", "m")
    assert state.summary_shown == SummaryShown("h", 2, "d")
    assert state.memory_snapshot is not None and state.memory_snapshot.item() == row["memorySnapshot"]
    # the one rule about what needs no summary: what the summary covers, and what came before a reset
    assert state.summarised_through == 30
    assert SessionState.of({**row, "summaryFrom": 0}).summarised_through == 20
    # values an older or broken row holds read as absent, never as an error
    broken = SessionState.of({"revision": "7", "summary": "text", "summaryShown": [], "memorySnapshot": {"text": "old"}})
    assert (broken.revision, broken.summary, broken.summary_shown, broken.memory_snapshot) == (0, None, None, None)
    assert RunningSummary.of({"text": "a", "parts": ["1"]}) == RunningSummary("a")
    # a block added at a cut without its place is not a snapshot that can be rebuilt
    assert StoredSnapshot.of({"template": "x", "digests": [], "added": [{"template": "y", "digests": []}]}) is None


def test_a_commit_writes_only_what_changed():
    assert SessionChanges(revision=2, last_run_id="run_1", message_count=10).attributes() == {
        "revision": 2,
        "messageCount": 10,
        "lastRunId": "run_1",
    }
    shown = SummaryShown("h", 1, "d")
    full = SessionChanges(
        3, "run_2", 24, trimmed_count=26, context_from=0, summary_shown=shown, title="T", counters={"runsSinceReset": 2}
    )
    assert full.attributes() == {
        "revision": 3,
        "messageCount": 24,
        "lastRunId": "run_2",
        "trimmedCount": 26,
        "contextFrom": 0,
        "runsSinceReset": 2,
        "summaryShown": {"head": "h", "parts": 1, "digest": "d"},
        "title": "T",
    }


def test_the_summary_shown_keeps_its_opening_digest_and_reads_rows_written_without_one():
    shown = SummaryShown("h", 2, "d", opening="o")
    assert SummaryShown.of(shown.item()) == shown
    assert SummaryShown.of({"head": "h", "parts": 2, "digest": "d"}) == SummaryShown("h", 2, "d")  # stored before it
