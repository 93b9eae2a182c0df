"""`make bench`: chat-turn cost in our code and AWS calls per turn (import times: bench/cold_start.py).

Turns run with the offline model against the local emulator (moto's server over loopback, as
`make dev` uses); the time spent inside the model call is subtracted, so the figures are our
code plus the AWS round trips.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


class AwsCallCounter:
    """Counts every AWS API call made through boto3's default session, by service and operation."""

    def __init__(self) -> None:
        import boto3

        boto3.setup_default_session()
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0  # wall time with at least one AWS call in flight (parallel calls counted once)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._since = 0.0
        boto3.DEFAULT_SESSION.events.register("before-call", self._on_call)
        boto3.DEFAULT_SESSION.events.register("after-call", self._on_done)
        boto3.DEFAULT_SESSION.events.register("after-call-error", self._on_done)

    def _on_call(self, model, **_kwargs) -> None:
        with self._lock:
            self.calls[f"{model.service_model.service_name}:{model.name}"] += 1
            if self._in_flight == 0:
                self._since = time.perf_counter()
            self._in_flight += 1

    def _on_done(self, **_kwargs) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.seconds += time.perf_counter() - self._since

    def take(self) -> tuple[Counter[str], float]:
        with self._lock:
            out, seconds, self.calls, self.seconds = self.calls, self.seconds, Counter(), 0.0
        return out, seconds


class TimedProvider:
    """Wraps a provider and adds the time spent inside it to `seconds[0]` (so it can be excluded)."""

    name = "timed"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seconds = [0.0]

    def complete(self, **kwargs):
        start = time.perf_counter()
        try:
            return self.inner.complete(**kwargs)
        finally:
            self.seconds[0] += time.perf_counter() - start


def bench_turns(turns_per_session: int, sessions: int) -> dict:
    from local.apigw import invoke_http
    from local.stack import start_stack

    counter = AwsCallCounter()
    handle = start_stack(port=0, model_provider="offline", workers=False)
    try:
        deps = handle.functions["ChatFunction"].module().ROOT.deps  # the function's own composition root
        timed = TimedProvider(deps.provider)
        model_seconds = timed.seconds
        deps.provider_override = timed
        per_turn_ms: list[float] = []
        cpu_ms: list[float] = []
        per_turn_calls: list[Counter[str]] = []
        for s in range(sessions):
            status, _, body = invoke_http(
                handle.functions, "POST", "/api/agents", body={"name": f"bench-{s}", "persona": "Benchmark agent."}, user="bench"
            )
            agent_id = json.loads(body)["data"]["id"]
            for i in range(turns_per_session):
                text = "what time is it?" if i % 5 == 4 else f"message {i}: tell me something about benchmarks"
                counter.take()
                model_seconds[0] = 0.0
                start = time.perf_counter()
                status, _, body = invoke_http(
                    handle.functions,
                    "POST",
                    f"/api/agents/{agent_id}/sessions/dashboard/messages",
                    body={"message": text},
                    user="bench",
                )
                elapsed = time.perf_counter() - start
                if status != 200:
                    raise RuntimeError(f"turn failed: {status} {body[:300]!r}")
                calls, aws_seconds = counter.take()
                per_turn_ms.append((elapsed - model_seconds[0]) * 1000)
                cpu_ms.append(max(0.0, elapsed - model_seconds[0] - aws_seconds) * 1000)
                per_turn_calls.append(calls)
    finally:
        handle.stop()

    by_op: Counter[str] = Counter()
    for calls in per_turn_calls:
        by_op.update(calls)
    n = len(per_turn_calls)
    return {
        "turns": n,
        "median_ms": statistics.median(per_turn_ms),
        "p95_ms": _percentile(per_turn_ms, 95),
        "own_median_ms": statistics.median(cpu_ms),
        "own_p95_ms": _percentile(cpu_ms, 95),
        "calls_per_turn": {op: count / n for op, count in sorted(by_op.items())},
        "total_calls_per_turn": sum(by_op.values()) / n,
        "before_reply_calls_per_turn": sum(c for op, c in by_op.items() if op != "sqs:SendMessage") / n,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40, help="turns per session")
    parser.add_argument("--sessions", type=int, default=5)
    args = parser.parse_args(argv)

    print("== chat turns (offline model, local emulator; model time excluded)")
    turns = bench_turns(args.turns, args.sessions)
    print(f"turns measured          {turns['turns']}")
    print(
        f"our code per turn       median {turns['median_ms']:.1f} ms   p95 {turns['p95_ms']:.1f} ms   (with the emulator's AWS round trips)"
    )
    print(
        f"  without AWS calls     median {turns['own_median_ms']:.1f} ms   p95 {turns['own_p95_ms']:.1f} ms   (Python only: handler, prompt, loop, trim)"
    )
    print(
        f"AWS calls per turn      {turns['total_calls_per_turn']:.2f} in all, {turns['before_reply_calls_per_turn']:.2f} before the reply (extraction enqueue aside)"
    )
    for op, count in turns["calls_per_turn"].items():
        print(f"  {op:<34} {count:.2f}")

    # Handler import times are measured as shipped (from the built layer, tracing on) by
    # bench/cold_start.py, the next step of `make bench`.

    from bench.locomo import main as locomo_main  # conversation_search recall (LoCoMo)

    locomo_main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
