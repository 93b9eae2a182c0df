"""bench/locomo.py's scoring, without the data set: recall_any/all and the LoCoMo paper's metric."""

from __future__ import annotations

import pytest

from bench.locomo import _score, evidence_ids


def test_scores_headline_over_categories_1_to_4_and_the_paper_metric_over_all_five():
    ten = [f"D1:{i}" for i in range(1, 11)]
    results = [
        (1, {"D1:1", "D1:7", "D9:9"}, ten),  # 2 of 3 evidence turns in the top 10, 1 in the top 5
        (4, {"D2:2"}, ten),  # none
        (5, {"D1:2"}, ten),  # adversarial: counted in "all" only
    ]
    scores = _score(results)
    assert scores["1-4"]["n"] == 2 and scores["all"]["n"] == 3
    assert scores["1-4"]["any10"] == 0.5 and scores["1-4"]["all10"] == 0.0
    assert scores[1]["ev5"] == pytest.approx(100 / 3) and scores[1]["ev10"] == pytest.approx(200 / 3)
    # the paper's metric: per question the share found, averaged over every question with evidence
    assert scores["all"]["ev10"] == pytest.approx((200 / 3 + 0 + 100) / 3)
    assert scores["all"]["ev5"] == pytest.approx((100 / 3 + 0 + 100) / 3)


def test_malformed_evidence_ids_are_repaired():
    assert evidence_ids(["D8:6; D9:17", "D:11:26"]) == {"D8:6", "D9:17", "D11:26"}


def test_a_session_is_archived_as_the_product_archives_turns():
    from bench.locomo import _archive_session
    from engram.agents.models import Agent
    from engram.recall.archive import ArchiveRepository

    conv = {"id": "conv-x", "speaker_a": "Caroline", "speaker_b": "Melanie"}
    lines = [
        ("Caroline", "D1:1", "Hi Mel!"),
        ("Melanie", "D1:2", "Hey!"),
        ("Melanie", "D1:3", "I painted a lake."),
        ("Caroline", "D1:4", "Nice"),
    ]
    session = {
        "id": "s1",
        "createdAt": "2023-05-08T13:56:00.000Z",
        "turns": [{"speaker": s, "ref": r, "text": t} for s, r, t in lines],
    }
    now = "2024-01-01T00:00:00.000Z"
    agent = Agent(id="locomo-conv-x", created_at=now, updated_at=now, name="Melanie", model="offline")
    items, refs = _archive_session(ArchiveRepository(None), agent, conv, session, fallback=now)  # type: ignore[arg-type]
    # two turns (a user line and the replies after it), a second apart, as ArchivePolicy writes them
    assert [(i["role"], i.get("speaker"), i["createdAt"]) for i in items] == [
        ("user", None, "2023-05-08T13:56:00.000Z"),
        ("assistant", "Melanie", "2023-05-08T13:56:00.000Z"),
        ("assistant", "Melanie", "2023-05-08T13:56:00.000Z"),
        ("user", None, "2023-05-08T13:56:01.000Z"),
    ]
    assert len({i["runId"] for i in items}) == 2 and not any("ref" in i for i in items)
    assert [refs[(i["sessionId"], i["runId"], i["seq"])] for i in items] == ["D1:1", "D1:2", "D1:3", "D1:4"]
