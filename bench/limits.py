"""`make bench`: what the spending limits (TL10) and the usage totals (OB4) cost a turn.

1. AWS calls per turn with the spending read and without it (the read replaced by an empty
   answer, the baseline), and how long a turn waited for the read: it is submitted at the
   turn's start beside the agent read and the session lease, and waited for after the context
   (transcript, memory sections) is loaded, just before the first model call.
2. CPU of the pure parts, per turn: the guard asked before a model call and before tools, and the
   totals' ADD updates built for the commit (four more items in its one transaction).

Turns run with the offline model against the local emulator (moto's server over loopback, as
`make dev` uses), with limits set on the agent and the person so the guard is active.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

from bench.run import AwsCallCounter, _percentile  # noqa: E402


def bench_turns(turns: int, *, read: bool) -> dict[str, object]:
    from local.apigw import invoke_http
    from local.stack import start_stack

    counter = AwsCallCounter()
    handle = start_stack(port=0, model_provider="offline", workers=False)
    # the stack's own engram modules (it loads the layer as the functions see it)
    from engram.engine import turn as engine_turn
    from engram.usage.limits import Spend

    waits: list[float] = []
    calls: list[Counter[str]] = []
    try:
        deps = handle.functions["ChatFunction"].module().ROOT.deps
        usage = deps.usage
        real_spend, real_load = usage.spend, engine_turn._load_context
        marks: dict[str, float] = {}

        def spend(tenant, agent_id, day):
            out = real_spend(tenant, agent_id, day) if read else Spend(day=day)
            marks["read_done"] = time.perf_counter()
            return out

        def load_context(turn):
            out = real_load(turn)
            marks["context_done"] = time.perf_counter()
            return out

        usage.spend = spend
        engine_turn._load_context = load_context
        try:

            def call(method: str, path: str, body: dict[str, object]) -> dict[str, object]:
                status, _, raw = invoke_http(handle.functions, method, path, body=body, user="bench")
                if status >= 300:
                    raise RuntimeError(f"{method} {path}: {status} {raw[:300]!r}")
                return json.loads(raw)["data"]

            call("PATCH", "/api/me", {"limits": {"dailyCostUsd": 50, "monthlyCostUsd": 500}})
            agent = call(
                "POST",
                "/api/agents",
                {"name": "bench", "persona": "Benchmark agent.", "limits": {"dailyCostUsd": 5, "toolCallsPerTurn": 20}},
            )
            for i in range(turns):
                counter.take()
                marks.clear()
                call(
                    "POST",
                    f"/api/agents/{agent['id']}/sessions/dashboard/messages",
                    {"message": f"message {i}: tell me about benchmarks"},
                )
                calls.append(counter.take()[0])
                waits.append(max(0.0, marks["read_done"] - marks["context_done"]) * 1000)
        finally:
            usage.spend, engine_turn._load_context = real_spend, real_load
    finally:
        handle.stop()
    by_op: Counter[str] = Counter()
    for c in calls:
        by_op.update(c)
    return {
        "calls_per_turn": {op: n / len(calls) for op, n in sorted(by_op.items())},
        "total": sum(by_op.values()) / len(calls),
        "wait_median_ms": statistics.median(waits),
        "wait_p95_ms": _percentile(waits, 95),
    }


def bench_cpu(iterations: int) -> dict[str, float]:
    from datetime import UTC, datetime

    from engram.aws.table import Table
    from engram.usage.limits import Spend, SpendGuard
    from engram.usage.models import Limits, UsageRow
    from engram.usage.repository import UsageRepository

    limits = Limits(daily_cost_usd=5, monthly_cost_usd=50, tool_calls_per_turn=20)
    spend = Spend(
        day=datetime.now(UTC).date(), agent_day=1.0, agent_month=10.0, user_day=2.0, user_limits=Limits(daily_cost_usd=50)
    )
    rows = [UsageRow(id="run_x-0", created_at=datetime.now(UTC).isoformat(), agent_id="ag_1", session_key="s", run_id="run_x",
                     model="claude-sonnet-4-6", input_tokens=1200, output_tokens=300, cache_read_tokens=4000,
                     cache_write_tokens=800, cost_usd=0.0123, cache_savings_usd=0.009)]  # fmt: skip
    repo = UsageRepository(Table("bench", client=object()))  # builds operations only: no call is made

    def per_call(fn) -> float:
        start = time.process_time()
        for _ in range(iterations):
            fn()
        return (time.process_time() - start) / iterations * 1e6

    def ask() -> None:
        guard = SpendGuard.of(limits, spend)
        assert guard is not None
        guard.before_call(0.01, 0.005)
        guard.before_tools(1, 2)

    return {
        "guard_us": per_call(ask),
        "totals_ops_us": per_call(lambda: repo.totals_ops("tenant", rows, kind="chat", tool_calls=2)),
        "items_added": float(len(repo.totals_ops("tenant", rows, kind="chat", tool_calls=2))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--iterations", type=int, default=5000)
    args = parser.parse_args(argv)
    print("== spending limits and usage totals (offline model, local emulator)")
    with_read = bench_turns(args.turns, read=True)
    without = bench_turns(args.turns, read=False)
    ops = sorted(set(with_read["calls_per_turn"]) | set(without["calls_per_turn"]))  # type: ignore[arg-type]
    print(f"AWS calls per turn      {with_read['total']:.2f} with the spending read, {without['total']:.2f} without")
    for op in ops:
        a, b = with_read["calls_per_turn"].get(op, 0.0), without["calls_per_turn"].get(op, 0.0)  # type: ignore[attr-defined]
        if a != b:
            print(f"  {op:<34} {a:.2f} vs {b:.2f}")
    print(
        f"waited for the read      median {with_read['wait_median_ms']:.2f} ms   p95 {with_read['wait_p95_ms']:.2f} ms"
        "   (after the context is loaded, before the first model call: 0 = off the critical path)"
    )
    cpu = bench_cpu(args.iterations)
    print(f"CPU per turn            guard {cpu['guard_us']:.1f} us (one model call, one tool answer); "
          f"totals updates {cpu['totals_ops_us']:.1f} us ({cpu['items_added']:.0f} items added to the commit)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
