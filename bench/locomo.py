"""`conversation_search` recall on LoCoMo (`python -m bench.locomo`, also the last part of `make bench`).

Per conversation, through the project's own storage (moto in-process, the table created from
template.yaml) and the product's own archive path: an agent named after speaker_b with one
session per LoCoMo session; speaker_a's lines are role user and speaker_b's role assistant, and
each user line with the assistant lines after it is one turn, archived by
`recall.policy.ArchivePolicy` (`prepare`, then `commit_items`: what a turn's commit transaction
writes: the agent's name as the assistant's speaker, and speaker_a's name as the person's, set
as `PATCH /api/me` sets it: issue 39), said a
second after the turn before from the session's date and time. Nothing of the benchmark is
written on the items: the hits are mapped back to LoCoMo's dia_ids by (session, run, seq). Every
question that has evidence is then asked through `recall.index.conversation_search` (the tool's
code path: the per-container cache, its incremental read, the ranker) and scored: recall_any@k
(any evidence turn in the top k), recall_all@10 (all of them), per category and over categories
1-4 (the headline: category 5, adversarial, asks about things that were not said, so "any
evidence turn found" means little there), and the time of each search. Next to them, the LoCoMo
paper's own retrieval metric (Maharana et al. 2024, Table 3): per question, the share of its
evidence turns in the top k, averaged over all questions with evidence of all five categories;
the paper's best retriever over dialogue turns, DRAGON, scores 56.7 at k=5 and 66.2 at k=10.

The ranker's weights were chosen on these same five conversations (the dev split), so the
figures are tuned on them: they show what the ranker does here, not what it does on
conversations it has not seen. What was tried, and what each step gave, is docs/recall-tuning.md.

A turn that shares a photo carries LoCoMo's caption as "[shares a photo: <caption>]" (the text a
text-only system would see of the image; `--no-captions` leaves it out). The `query` field of image
turns (the search words used to find the image) is annotation and is never used.

The data: `--locomo PATH` (default ../shared/data/locomo/locomo-dev.json, read in place, never copied).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "layers" / "core") not in sys.path:
    sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)  # recall_any/all: categories 1-4 ("1-4"); the paper's metric: all five ("all")
DRAGON = {5: 56.7, 10: 66.2}  # the LoCoMo paper's Table 3: evidence share in the top k, dialogue turns
TENANT = "tlocomobench"
# The dev split the ranker's weights were chosen on (docs/recall-tuning.md): a figure over them is tuned on them.
TUNED_ON = frozenset({"conv-26", "conv-30", "conv-41", "conv-42", "conv-43"})


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def session_iso(raw: str | None) -> str | None:
    """ "1:56 pm on 8 May, 2023" -> "2023-05-08T13:56:00.000Z"."""
    if not raw:
        return None
    try:
        stamp = datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return stamp.strftime("%Y-%m-%dT%H:%M:00.000Z")


def evidence_ids(raw: list[Any] | None) -> set[str]:
    """Malformed entries ("D8:6; D9:17", "D:11:26") are split and repaired."""
    out = set()
    for entry in raw or []:
        for part in re.split(r"[;,\s]+", str(entry)):
            part = part.strip()
            if part:
                out.add(re.sub(r"^D:", "D", part))
    return out


def load_conversations(path: Path, *, captions: bool = True) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list))
        sessions = []
        for n in numbers:
            turns = []
            for turn in conv[f"session_{n}"]:
                text = turn.get("text") or ""
                if captions and turn.get("blip_caption"):
                    text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
                turns.append({"speaker": turn["speaker"], "ref": turn["dia_id"], "text": text})
            sessions.append({"id": f"s{n}", "createdAt": session_iso(conv.get(f"session_{n}_date_time")), "turns": turns})
        questions = []
        for qa in sample.get("qa", []):
            category = qa.get("category")
            evidence = evidence_ids(qa.get("evidence"))
            if category in CATEGORIES and evidence:
                questions.append({"question": qa["question"], "category": category, "evidence": evidence})
        conversations.append(
            {
                "id": sample.get("sample_id", f"conv-{len(conversations)}"),
                "speaker_a": conv["speaker_a"],
                "speaker_b": conv["speaker_b"],
                "sessions": sessions,
                "questions": questions,
            }
        )
    return conversations


def _turns_of(session: dict[str, Any], roles: dict[str, str]) -> list[list[dict[str, Any]]]:
    """A LoCoMo session as the turns a real session has: each user message with the assistant
    messages that answer it (a turn is a user message and its replies; consecutive user lines are
    turns of their own)."""
    turns: list[list[dict[str, Any]]] = []
    for t in session["turns"]:
        role = roles.get(t["speaker"], "user")
        if role == "user" or not turns:
            turns.append([])
        turns[-1].append({**t, "role": role})
    return turns


def _archive_session(
    archive: Any, agent: Any, conv: dict[str, Any], session: dict[str, Any], fallback: str, profiles: Any = None
) -> tuple[list[dict[str, Any]], dict[tuple[str, str, int], str]]:
    """One LoCoMo session archived as the product archives a session: one `ArchivePolicy.commit_items`
    per turn (what a turn's commit transaction writes), speaker_a as role user and speaker_b as
    role assistant (the agent, named after speaker_b), each turn said a second after the one
    before from the session's date and time. Returns the items and, for scoring, the LoCoMo turn
    (dia_id) of each (sessionId, runId, seq): nothing of the benchmark is written on the items."""
    from engram.engine.tools import ToolContext
    from engram.recall.policy import ArchivePolicy

    policy = ArchivePolicy(archive, profiles)
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    start = datetime.strptime(session["createdAt"] or fallback, "%Y-%m-%dT%H:%M:%S.%fZ")
    items: list[dict[str, Any]] = []
    refs: dict[tuple[str, str, int], str] = {}
    for n, turn in enumerate(_turns_of(session, roles)):
        run_id = f"run-{session['id']}-{n:04d}"
        at = (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        ctx = ToolContext(tenant=TENANT, agent=agent, session_id=session["id"], run_id=run_id)
        messages = [{"role": m["role"], "content": [{"type": "text", "text": m["text"]}]} for m in turn]
        policy.prepare(ctx)  # as a turn does: reads the person's name
        turn_items = policy.commit_items(ctx, messages, at)
        said = [m for m in turn if m["text"].strip()]
        if len(turn_items) != len(said):
            raise RuntimeError(f"{conv['id']} {session['id']}: {len(turn_items)} items for {len(said)} messages (one was split?)")
        for item, message in zip(turn_items, said, strict=True):
            refs[(item["sessionId"], item["runId"], item["seq"])] = message["ref"]
        items.extend(turn_items)
    return items, refs


def _score(results: list[tuple[int, set[str], list[str]]]) -> dict[Any, dict[str, float]]:
    """Per category, "1-4" (the headline) and "all" (1-5): recall_any@5/@10, recall_all@10 and the
    paper's metric ev5/ev10 (the share of the question's evidence turns in the top k, in %)."""
    per_cat: dict[Any, list[tuple[bool, bool, bool, float, float]]] = defaultdict(list)
    for category, evidence, got in results:
        top5, top10 = set(got[:5]), set(got[:10])
        row = (
            bool(evidence & top5),
            bool(evidence & top10),
            evidence <= top10,
            len(evidence & top5) / len(evidence),
            len(evidence & top10) / len(evidence),
        )
        per_cat[category].append(row)
        per_cat["all"].append(row)
        if category in HEADLINE:
            per_cat["1-4"].append(row)
    return {
        cat: {
            "n": len(rows),
            "any5": sum(r[0] for r in rows) / len(rows),
            "any10": sum(r[1] for r in rows) / len(rows),
            "all10": sum(r[2] for r in rows) / len(rows),
            "ev5": 100 * sum(r[3] for r in rows) / len(rows),
            "ev10": 100 * sum(r[4] for r in rows) / len(rows),
        }
        for cat, rows in per_cat.items()
    }


def run_benchmark(path: Path, *, captions: bool = True) -> dict[str, Any]:
    """Loads every conversation into moto through the stores and asks every question through the tool path."""
    import boto3
    from moto import mock_aws

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    saved_endpoint = os.environ.pop("AWS_ENDPOINT_URL", None)
    conversations = load_conversations(path, captions=captions)
    try:
        with mock_aws():
            from engram.agents.models import Agent
            from engram.agents.repository import AgentRepository
            from engram.aws.table import Table
            from engram.conversations.models import Session
            from engram.conversations.repository import SessionRepository
            from engram.facts.repository import ProfileRepository
            from engram.kernel.model import now_iso
            from engram.recall import index as recall
            from engram.recall.archive import ArchiveRepository
            from local.resources import create_resources
            from local.template import load_template

            resources = create_resources(load_template(ROOT / "template.yaml"))
            table_name = resources.env()["TABLE_NAME"]
            table = Table(table_name, client=boto3.client("dynamodb", region_name="us-east-1"))
            archive = ArchiveRepository(table)
            profiles = ProfileRepository(table)
            agents, sessions = AgentRepository(table), SessionRepository(table)
            recall.clear_cache()

            results: list[tuple[int, set[str], list[str]]] = []
            per_conv: dict[str, float] = {}
            search_ms: list[float] = []
            first_ms: list[float] = []
            items_total = 0
            for conv in conversations:
                now = now_iso()
                agent_id = f"locomo-{re.sub(r'[^A-Za-z0-9_-]', '-', conv['id'])}"
                agent = Agent(id=agent_id, created_at=now, updated_at=now, name=conv["speaker_b"], model="offline")
                dashboard = Session(id="dashboard", agent_id=agent_id, created_at=now, updated_at=now)
                agents.create(
                    TENANT,
                    agent,
                    webhook_secret="unused",
                    with_items=[sessions.item(TENANT, dashboard)],
                    max_agents=10_000,
                    max_scheduled=1,
                )
                refs: dict[tuple[str, str, int], str] = {}
                # speaker_a is the person: their name is set as PATCH /api/me sets it (one user
                # talks to each conversation's agent, one conversation at a time).
                profiles.set_name(TENANT, conv["speaker_a"])
                for session in conv["sessions"]:
                    sessions.create(
                        TENANT, Session(id=session["id"], agent_id=agent_id, created_at=now, updated_at=now), limit=10_000
                    )
                    items, session_refs = _archive_session(archive, agent, conv, session, fallback=now, profiles=profiles)
                    refs.update(session_refs)
                    items_total += archive.put_many(TENANT, agent_id, items)
                conv_results = []
                for i, q in enumerate(conv["questions"]):
                    start = time.perf_counter()
                    hits = recall.conversation_search(archive, TENANT, agent_id, q["question"], limit=10)
                    elapsed = (time.perf_counter() - start) * 1000
                    (first_ms if i == 0 else search_ms).append(elapsed)
                    got = [refs[(h["sessionId"], h["runId"], h["seq"])] for h in hits]
                    conv_results.append((q["category"], q["evidence"], got))
                results.extend(conv_results)
                per_conv[conv["id"]] = _score(conv_results)["1-4"]["any10"]
                # the agent cascade removes its archive too (and keeps moto's table, which it scans, small)
                agents.delete_cascade(TENANT, agent_id)
                if archive.load_since(TENANT, agent_id, None):
                    raise RuntimeError(f"{agent_id}: archive items survived the agent's deletion")
    finally:
        if saved_endpoint is not None:
            os.environ["AWS_ENDPOINT_URL"] = saved_endpoint
    return {
        "scores": _score(results),
        "per_conversation": per_conv,
        "search_p50_ms": statistics.median(search_ms),
        "search_p95_ms": _percentile(search_ms, 95),
        "first_search_ms": statistics.median(first_ms),
        "items": items_total,
        "conversations": len(conversations),
        "questions": len(results),
        "ranker_ms": _ranker_times(conversations),
        "first_search_3000_ms": _first_search_ms(conversations, 3000),
    }


def _ranker_times(conversations: list[dict[str, Any]], params: Any = None) -> tuple[float, float]:
    """p50/p95 of the ranking alone (an index built the way the cache builds it, no I/O)."""
    from datetime import date

    times = []
    for conv in conversations:
        index = _index_for(conv, params)
        for q in conv["questions"]:
            start = time.perf_counter()
            index.search(q["question"], limit=10, today=date.today().toordinal())
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), _percentile(times, 95)


def _first_search_ms(conversations: list[dict[str, Any]], turns: int, repeats: int = 5) -> float:
    """Median time of an agent's first search over ``turns`` archived turns (the LoCoMo turns, the
    conversations repeated as new sessions until there are enough): the cache loads the items from
    an in-memory archive (no DynamoDB read), indexes them all and ranks one question."""
    from engram.recall import index as recall

    items: list[dict[str, Any]] = []
    round_ = 0
    while len(items) < turns:
        for conv in conversations:
            for session in conv["sessions"]:
                for turn in session["turns"]:
                    if len(items) == turns:
                        break
                    n = len(items)
                    at = session["createdAt"] or "2023-01-01T00:00:00.000Z"
                    said_by_agent = turn["speaker"] == conv["speaker_b"]
                    items.append(
                        {
                            "kind": "msg",
                            "SK": f"ARCHIVE#{n:06d}",
                            "sessionId": f"{conv['id']}-{round_}-{session['id']}",
                            "role": "assistant" if said_by_agent else "user",
                            "speaker": turn["speaker"],  # both named, as ArchivePolicy names them
                            "text": turn["text"],
                            "createdAt": at,
                            "archivedAt": f"{at}#{n:06d}",
                            "runId": "bench",
                        }
                    )
        round_ += 1

    class _Archive:
        name = "bench-first-search"

        def load_since(self, t: str, agent_id: str, after: str | None, *, limit: int | None = None) -> list[dict[str, Any]]:
            return [] if after is not None else items[-limit:] if limit else list(items)

    question = conversations[0]["questions"][0]["question"]
    times = []
    for _ in range(repeats):
        recall.clear_cache()
        start = time.perf_counter()
        recall.conversation_search(_Archive(), TENANT, "first-search", question, limit=10)
        times.append((time.perf_counter() - start) * 1000)
    recall.clear_cache()
    return statistics.median(times)


def _index_for(conv: dict[str, Any], params: Any) -> Any:
    from engram.recall.search import SearchIndex

    index = SearchIndex(params)
    index.refs = []  # type: ignore[attr-defined]
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    for session in conv["sessions"]:
        for turn in session["turns"]:
            role = roles.get(turn["speaker"], "user")
            speaker = turn["speaker"]  # both sides named, as ArchivePolicy names them (issue 39)
            index.add(turn["text"], speaker=speaker, group=session["id"], when=session["createdAt"], role=role)
            index.refs.append(turn["ref"])  # type: ignore[attr-defined]
    return index


def ablation(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The kept steps of the log, cumulatively, with the ranker alone (same index as the cache builds)."""
    from dataclasses import replace

    from engram.recall.params import Params

    base = Params(length_prior=0.0, question_weight=1.0, yearless_months=False, surface_share=0.0)  # before issue 12
    off = replace(
        base,
        stemming=False,
        ctx_window=0,
        speaker_weight=0.0,
        speaker_text=1.0,
        session_weight=0.0,
        time_weight=0.0,
        date_weight=0.0,
    )
    steps = [
        ("BM25, stop words", off, False),
        ("+ photo captions", off, True),
        ("+ Porter stemming", replace(off, stemming=True), True),
        (
            "+ ctx: neighbours (1 each side, 0.25)",
            replace(off, stemming=True, ctx_window=1, ctx_weight=0.25, ctx_next_weight=0.25),
            True,
        ),
        (
            "+ ctx window 2, 0.4 before / 0.25 after",
            replace(off, stemming=True, ctx_window=2, ctx_weight=0.4, ctx_next_weight=0.25),
            True,
        ),
        ("+ speaker field", replace(base, session_weight=0.0, time_weight=0.0, date_weight=0.0), True),
        ("+ 'when' answer-type cue", replace(base, session_weight=0.0, date_weight=0.0), True),
        ("+ dates", replace(base, session_weight=0.0), True),
        ("+ session prior", base, True),
        ("+ turn length prior 0.2", replace(Params(), question_weight=1.0, yearless_months=False, surface_share=0.0), True),
        ("+ question turns x0.8", replace(Params(), yearless_months=False, surface_share=0.0), True),
        ("+ months without a year", replace(Params(), surface_share=0.0), True),
        ("+ exact word forms 0.3 (= the default)", Params(), True),
    ]
    out = []
    cache: dict[bool, list[dict[str, Any]]] = {}
    from datetime import date

    for name, params, captions in steps:
        conversations = cache.setdefault(captions, load_conversations(path, captions=captions))
        results = []
        for conv in conversations:
            index = _index_for(conv, params)
            for q in conv["questions"]:
                hits = index.search(q["question"], limit=10, today=date.today().toordinal())
                results.append((q["category"], q["evidence"], [index.refs[d] for d, _ in hits]))
        out.append((name, _score(results)))
    return out


def _table(scores: dict[Any, dict[str, float]]) -> list[str]:
    lines = [f"{'category':<17}{'n':>5}{'any@5':>8}{'any@10':>8}{'all@10':>8}{'ev@5':>8}{'ev@10':>8}"]
    for cat in [1, 2, 3, 4, "1-4", 5, "all"]:
        if cat not in scores:
            continue
        s = scores[cat]
        label = f"{cat} {CATEGORIES[cat]}" if isinstance(cat, int) else {"1-4": "overall 1-4", "all": "all 1-5"}[cat]
        lines.append(
            f"{label:<17}{s['n']:>5}{s['any5']:>8.3f}{s['any10']:>8.3f}{s['all10']:>8.3f}{s['ev5']:>8.1f}{s['ev10']:>8.1f}"
        )
    return lines


def print_report(report: dict[str, Any]) -> None:
    scores = report["scores"]
    print(
        f"{report['conversations']} conversations, {report['items']} archived turns, {report['questions']} questions with evidence"
    )
    tuned = sorted(set(report["per_conversation"]) & TUNED_ON)
    if tuned == sorted(report["per_conversation"]):
        print(f"  tuned on these {len(tuned)}: the ranker's weights were chosen on these conversations (docs/recall-tuning.md)")
    else:
        print(f"  {len(tuned)} of these ({', '.join(tuned) or 'none'}) are the conversations the ranker's weights were tuned on")
    print("\n".join(_table(scores)))
    print(
        "  any/all: recall_any@k, recall_all@10 (headline: overall 1-4); ev@k: the LoCoMo paper's Table 3 metric, "
        f"% of a question's evidence turns in the top k (DRAGON, dialogue turns: {DRAGON[5]} at k=5, {DRAGON[10]} at k=10; "
        f"here {scores['all']['ev5']:.1f} and {scores['all']['ev10']:.1f} over all five categories)"
    )
    per = "  ".join(f"{k} {v:.3f}" for k, v in report["per_conversation"].items())
    print(f"any@10 (1-4) per conversation: {per}")
    print(
        f"conversation_search  p50 {report['search_p50_ms']:.2f} ms   p95 {report['search_p95_ms']:.2f} ms   "
        f"(warm cache, incl. its incremental GSI Query to in-process moto, which scans the table in Python)"
    )
    r50, r95 = report["ranker_ms"]
    print(
        f"  ranking alone      p50 {r50:.2f} ms   p95 {r95:.2f} ms;   first search of an agent (loads and indexes "
        f"its archive) {report['first_search_ms']:.0f} ms through moto"
    )
    print(
        f"  first search of an agent with 3,000 archived turns (in-memory archive: indexing + ranking, "
        f"no DynamoDB read) {report['first_search_3000_ms']:.0f} ms (aim: under 1 s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="conversation_search recall on LoCoMo")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="the LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--no-captions", action="store_true", help="leave photo captions out of the turn text")
    parser.add_argument(
        "--ablation", action="store_true", help="also print the kept steps of the log, cumulatively (ranker only)"
    )
    args = parser.parse_args(argv)

    print("\n== conversation_search recall (LoCoMo evidence turns)")
    if not args.locomo.exists():
        print(f"skipped: {args.locomo} not found (pass --locomo PATH)")
        return 0
    print_report(run_benchmark(args.locomo, captions=not args.no_captions))
    if args.ablation:
        print(
            f"\n{'step (cumulative, ranker only; any/all over 1-4)':<50}{'any@5':>7}{'any@10':>7}{'all@10':>7}{'ev@5':>7}{'ev@10':>7}"
        )
        for name, scores in ablation(args.locomo):
            s, a = scores["1-4"], scores["all"]
            print(f"{name:<50}{s['any5']:>7.3f}{s['any10']:>7.3f}{s['all10']:>7.3f}{a['ev5']:>7.1f}{a['ev10']:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
