"""`make bench` (extraction): the extraction worker per job without the model, its AWS calls per
job, and how much of the 12,000-character transcript cap real conversations use.

Jobs are the LoCoMo development sessions (`--locomo PATH`, default ../shared/data/locomo/
locomo-dev.json, read in place, never copied): each session is one run transcript, speaker_a's
turns role user and speaker_b's role assistant, a shared photo as "[shares a photo: <caption>]".
One agent per conversation (in a workspace, agent memory on, so every job takes the full path:
claim, row loads, model, commit), its sessions in order, so memory accumulates as it would.

Each job is an SQS event handed to ExtractFunction's handler (powertools BatchProcessor included)
against the local emulator (moto's server over loopback, as `make dev` uses) with the offline
model; the model call's time is subtracted. The offline model only finds explicit phrasings
("I prefer ...", "my ... is ..."), so fewer jobs store rows than Claude would; the write path
(BatchGetItem + one transaction) is the same whatever the number of rows.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "layers" / "core") not in sys.path:
    sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
USER = "bench-extract"


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def locomo_runs(path: Path) -> list[list[list[dict[str, Any]]]]:
    """Per conversation, its sessions in order, each as the messages of one run."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for sample in data:
        conv = sample["conversation"]
        roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        numbers = sorted(int(k.split("_")[1]) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list))
        sessions = []
        for n in numbers:
            messages = []
            for turn in conv[f"session_{n}"]:
                text = turn.get("text") or ""
                if turn.get("blip_caption"):
                    text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
                if text:
                    messages.append({"role": roles.get(turn["speaker"], "user"), "content": [{"type": "text", "text": text}]})
            sessions.append(messages)
        out.append(sessions)
    return out


def cap_share(conversations: list[list[list[dict[str, Any]]]]) -> dict[str, Any]:
    from engram.extraction.prompt import MAX_TRANSCRIPT_CHARS, MIN_TRANSCRIPT_CHARS, render_transcript

    lengths = [len(render_transcript(messages)) for sessions in conversations for messages in sessions]
    shares = [min(n, MAX_TRANSCRIPT_CHARS) / MAX_TRANSCRIPT_CHARS for n in lengths]
    over = [n for n in lengths if n > MAX_TRANSCRIPT_CHARS]
    return {
        "sessions": len(lengths),
        "chars_median": statistics.median(lengths),
        "chars_p90": _percentile(lengths, 90),
        "chars_max": max(lengths),
        "share_mean": statistics.fmean(shares),
        "share_median": statistics.median(shares),
        "share_p90": _percentile(shares, 90),
        "over_cap": len(over),
        "cut_chars_share": sum(n - MAX_TRANSCRIPT_CHARS for n in over) / sum(lengths),
        "under_min": sum(1 for n in lengths if n < MIN_TRANSCRIPT_CHARS),
    }


def _event(job: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    from local.workers import build_sqs_event

    body = json.dumps(job, separators=(",", ":"))
    message = {
        "MessageId": str(uuid.uuid4()),
        "ReceiptHandle": "bench",
        "Body": body,
        "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
    }
    return build_sqs_event([message], queue_arn, "us-east-1")


def bench_jobs(conversations: list[list[list[dict[str, Any]]]], limit: int | None) -> dict[str, Any]:
    from bench.run import AwsCallCounter, TimedProvider
    from local.apigw import invoke_http
    from local.stack import start_stack

    counter = AwsCallCounter()
    handle = start_stack(port=0, model_provider="offline", workers=False)
    try:
        from engram.kernel.ids import tenant_key

        deps = handle.functions["ExtractFunction"].module().ROOT.deps  # the function's own composition root
        timed = TimedProvider(deps.provider)
        model_seconds = timed.seconds
        deps.provider_override = timed
        fn = handle.functions["ExtractFunction"]
        fn.handler()  # the cold import is not a job's cost
        queue_arn = handle.resources.queue_arn("ExtractQueue")
        tenant = tenant_key(USER)

        def call(method: str, path: str, body: Any) -> dict[str, Any]:
            status, _, raw = invoke_http(handle.functions, method, path, body=json.dumps(body), user=USER)
            if status >= 300:
                raise RuntimeError(f"{method} {path}: {status} {raw[:200]!r}")
            return json.loads(raw)["data"]

        def run_job(agent_id: str, run_id: str, messages: list[dict[str, Any]]) -> tuple[float, float, Counter[str]]:
            job = {
                "runId": run_id,
                "tenant": tenant,
                "agentId": agent_id,
                "sessionId": "dashboard",
                "kind": "chat",
                "messages": messages,
            }
            event = _event(job, queue_arn)
            counter.take()
            model_seconds[0] = 0.0
            start = time.perf_counter()
            result = fn.invoke(event)
            elapsed = time.perf_counter() - start
            calls, aws_seconds = counter.take()
            if result != {"batchItemFailures": []}:
                raise RuntimeError(f"job {run_id} failed: {result}")
            return (elapsed - model_seconds[0]) * 1000, max(0.0, elapsed - model_seconds[0] - aws_seconds) * 1000, calls

        full_ms, own_ms, per_job, statuses, rows = [], [], [], Counter(), 0
        done = 0
        for c, sessions in enumerate(conversations):
            ws = call("POST", "/api/workspaces", {"name": f"locomo-{c}"})
            agent = call("POST", "/api/agents", {"name": f"locomo-{c}", "workspaceId": ws["id"], "agentMemory": True})
            for s, messages in enumerate(sessions):
                if limit is not None and done >= limit:
                    break
                run_id = f"run_bench_{c}_{s}"
                ms, own, calls = run_job(agent["id"], run_id, messages)
                full_ms.append(ms)
                own_ms.append(own)
                per_job.append(calls)
                marker = deps.table.get(f"{tenant}#A#{agent['id']}", f"EXTRACT#{run_id}")
                statuses[(marker or {}).get("outcome", {}).get("status", "skipped")] += 1
                done += 1
            rows += sum(1 for m in deps.memories.all(tenant, "workspace", ws["id"]) if m.source == "auto")
            rows += sum(1 for m in deps.memories.all(tenant, "agent", agent["id"]) if m.source == "auto")

        # the default agent (no workspace, agent memory off): nothing can be stored, so no model call
        plain = call("POST", "/api/agents", {"name": "plain"})
        skipped = [run_job(plain["id"], f"run_bench_plain_{i}", conversations[0][i % len(conversations[0])]) for i in range(20)]
    finally:
        handle.stop()

    by_op: Counter[str] = Counter()
    for calls in per_job:
        by_op.update(calls)
    n = len(per_job)
    skipped_ops: Counter[str] = Counter()
    for _, _, calls in skipped:
        skipped_ops.update(calls)
    return {
        "jobs": n,
        "statuses": dict(statuses),
        "auto_rows": rows,
        "median_ms": statistics.median(full_ms),
        "p95_ms": _percentile(full_ms, 95),
        "own_median_ms": statistics.median(own_ms),
        "own_p95_ms": _percentile(own_ms, 95),
        "calls_per_job": {op: count / n for op, count in sorted(by_op.items())},
        "total_calls_per_job": sum(by_op.values()) / n,
        "skipped_median_ms": statistics.median(ms for ms, _, _ in skipped),
        "skipped_calls_per_job": {op: count / len(skipped) for op, count in sorted(skipped_ops.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON (read in place)")
    parser.add_argument("--jobs", type=int, default=None, help="at most this many jobs (default: every session)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before engram's logger exists: one INFO line per job otherwise
    if not args.locomo.exists():
        print(f"== extraction: skipped, no LoCoMo data at {args.locomo}")
        return 0
    conversations = locomo_runs(args.locomo)

    share = cap_share(conversations)
    print("== extraction: the 12,000-character transcript cap on LoCoMo dev sessions (one session = one run)")
    print(f"sessions                {share['sessions']}   ({share['under_min']} under the 200-character minimum)")
    print(f"transcript characters   median {share['chars_median']:.0f}   p90 {share['chars_p90']:.0f}   max {share['chars_max']}")
    print(
        f"share of the cap used   mean {share['share_mean']:.0%}   median {share['share_median']:.0%}   p90 {share['share_p90']:.0%}"
    )
    print(
        f"over the cap            {share['over_cap']} session(s); {share['cut_chars_share']:.1%} of all characters cut (the start of those sessions)"
    )

    # powertools prints EMF blobs to stdout even with metrics disabled (cold starts, every 100 values)
    with contextlib.redirect_stdout(io.StringIO()):
        jobs = bench_jobs(conversations, args.jobs)
    print("\n== extraction worker per job (ExtractFunction handler, offline model, local emulator; model time excluded)")
    print(f"jobs                    {jobs['jobs']}   outcomes {jobs['statuses']}   auto rows stored {jobs['auto_rows']}")
    print(
        f"worker time per job     median {jobs['median_ms']:.1f} ms   p95 {jobs['p95_ms']:.1f} ms   (with the emulator's AWS round trips)"
    )
    print(
        f"  without AWS calls     median {jobs['own_median_ms']:.1f} ms   p95 {jobs['own_p95_ms']:.1f} ms   (Python only: render, prompt, parse, choose)"
    )
    print(f"AWS calls per job       {jobs['total_calls_per_job']:.2f}")
    for op, count in jobs["calls_per_job"].items():
        print(f"  {op:<34} {count:.2f}")
    skipped_total = sum(jobs["skipped_calls_per_job"].values())
    ops = ", ".join(f"{op} {c:.0f}" for op, c in jobs["skipped_calls_per_job"].items())
    print(
        f"default agent (nothing to store): median {jobs['skipped_median_ms']:.1f} ms, {skipped_total:.0f} AWS call(s) ({ops}), no model call"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
