"""`make bench` (runs): heartbeat and council runs in our code per run, and their AWS calls per run.

Each run is a scheduler firing (`{"tenant", "agentId", "scheduledTime"}`, a new scheduledTime per
run) handed to HeartbeatFunction's handler, against the local emulator (moto's server over
loopback, as `make dev` uses) with the offline model; the time inside the model calls is
subtracted. Scenarios:
- heartbeat, Active Memory off: an agent with a decision card and reviewDecisions, so the full
  decision cycle runs (get_my_decisions, submit_result) on a clean slate;
- heartbeat, Active Memory on: the same, sharing the main session (`dashboard`) with chat, so the
  transcript is read from and written back to S3;
- council: a lead with three plain specialists, run in parallel first (their model time is
  subtracted too); the offline model makes the lead read their results with memory_read.
A redelivered firing (a scheduledTime already run) is measured as well: it must run nothing.

The council's specialists run in threads: their model time is summed (the offline model's calls
are well under a millisecond each and, measured, do not overlap), and the AWS time counts parallel
calls once, so a council's "Python only" is the wall time with no AWS call in flight in any thread:
one specialist's Python while another waits on DynamoDB is not in it (the critical path, not the
CPU summed over the threads). moto's DynamoDB is not thread-safe; the local stack serialises its
requests (local/emulator.py). Should the emulator still answer a 500 (botocore retries it after a
backoff), it is counted and shown rather than printed as a traceback: the backoff would land in
the "with AWS" figure only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import statistics
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "layers" / "core") not in sys.path:
    sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

USER = "bench"
PROMPT = "Check BTC and report."
_EPOCH = datetime(2030, 1, 1, tzinfo=UTC)  # firings one hour apart from here: distinct scheduled times


def _scheduled_time(i: int) -> str:
    return (_EPOCH + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ")


def measure(counter: Any, model_seconds: list[float], call: Any) -> tuple[float, float, Counter[str], Any]:
    """Runs `call()`; returns its ms without the model, its ms without the model nor AWS calls in
    flight (Python only), its AWS calls by service:operation, and its result."""
    counter.take()
    model_seconds[0] = 0.0
    start = time.perf_counter()
    result = call()
    elapsed = time.perf_counter() - start - model_seconds[0]
    calls, aws_seconds = counter.take()
    return elapsed * 1000, max(0.0, elapsed - aws_seconds) * 1000, calls, result


def _summary(per_run_ms: list[float], own_ms: list[float], per_run_calls: list[Counter[str]]) -> dict[str, Any]:
    from bench.run import _percentile

    n = len(per_run_calls)
    by_op = sum(per_run_calls, Counter())
    out: dict[str, Any] = {
        "runs": n,
        "calls_per_run": {op: count / n for op, count in sorted(by_op.items())},
        "total_calls_per_run": by_op.total() / n,
    }
    for prefix, values in (("", per_run_ms), ("own_", own_ms)):
        out[f"{prefix}median_ms"], out[f"{prefix}p95_ms"] = statistics.median(values), _percentile(values, 95)
    return out


class EmulatorErrors(logging.Handler):
    """Takes over the `werkzeug` logger (moto's server): keeps the last line of each request error
    instead of printing its traceback. `retries` counts botocore's retries (from the responses)."""

    def __init__(self, session: Any) -> None:
        super().__init__()
        self.errors: Counter[str] = Counter()
        self.retries = 0
        self._lock = threading.Lock()
        self._logger = logging.getLogger("werkzeug")
        self._saved = (self._logger.handlers[:], self._logger.propagate)
        self._logger.handlers[:] = [self]
        self._logger.propagate = False
        self._session = session
        session.events.register("after-call", self._on_done)

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            lines = record.getMessage().strip().splitlines()
            with self._lock:
                self.errors[lines[-1] if lines else "?"] += 1

    def _on_done(self, parsed: Any = None, **_kwargs: Any) -> None:
        attempts = (parsed or {}).get("ResponseMetadata", {}).get("RetryAttempts", 0) if isinstance(parsed, dict) else 0
        if attempts:
            with self._lock:
                self.retries += attempts

    def take(self) -> tuple[Counter[str], int]:
        with self._lock:
            out, retries, self.errors, self.retries = self.errors, self.retries, Counter(), 0
        return out, retries

    def restore(self) -> None:
        self._session.events.unregister("after-call", self._on_done)
        self._logger.handlers[:], self._logger.propagate = self._saved


def bench_runs(heartbeats: int, councils: int) -> dict[str, Any]:
    import boto3

    from bench.run import AwsCallCounter, TimedProvider
    from local.apigw import invoke_http
    from local.stack import start_stack

    counter = AwsCallCounter()
    handle = start_stack(port=0, model_provider="offline", workers=False)
    emulator = EmulatorErrors(boto3.DEFAULT_SESSION)  # after start_stack, which sets the werkzeug logger up
    try:
        from engram.kernel.ids import tenant_key

        deps = handle.functions["HeartbeatFunction"].module().ROOT.deps  # the function's own composition root
        timed = TimedProvider(deps.provider)
        model_seconds = timed.seconds  # shared by the council's parallel specialists: summed, all excluded
        deps.provider_override = timed
        fn = handle.functions["HeartbeatFunction"]
        fn.handler()  # the cold import is not a run's cost
        tenant = tenant_key(USER)

        def create_agent(body: dict[str, Any]) -> str:
            status, _, raw = invoke_http(handle.functions, "POST", "/api/agents", body=body, user=USER)
            if status != 201:
                raise RuntimeError(f"POST /api/agents: {status} {raw[:300]!r}")
            return json.loads(raw)["data"]["id"]

        def fire(agent_id: str, when: str) -> tuple[float, float, Counter[str], dict[str, Any]]:
            event = {
                "source": "engram.schedule",
                "tenant": tenant,
                "agentId": agent_id,
                "scheduledTime": when,
                "executionId": "bench",
                "attempt": "1",
            }
            return measure(counter, model_seconds, lambda: fn.invoke(event))

        def scenario(agent_id: str, n: int, check: Any = None) -> dict[str, Any]:
            full_ms, own_ms, per_run = [], [], []
            emulator.take()
            for i in range(n):
                ms, own, calls, result = fire(agent_id, _scheduled_time(i))
                if result.get("status") != "succeeded":
                    raise RuntimeError(f"run {i} of {agent_id}: {result}")
                if check is not None:
                    check(result["runId"])
                full_ms.append(ms)
                own_ms.append(own)
                per_run.append(calls)
            errors, retries = emulator.take()
            return {**_summary(full_ms, own_ms, per_run), "emulator_errors": dict(errors), "retries_per_run": retries / n}

        def tool_calls(run_id: str) -> set[str]:
            run = deps.runs.get(tenant, run_id)
            return {c.get("name") for c in (run.tool_calls or [])} if run else set()

        def decision_cycle(run_id: str) -> None:
            if not {"get_my_decisions", "submit_result"} <= tool_calls(run_id):
                raise RuntimeError(f"heartbeat {run_id} skipped the decision cycle: {sorted(tool_calls(run_id))}")

        def lead_read_memory(run_id: str) -> None:
            if "memory_read" not in tool_calls(run_id):
                raise RuntimeError(f"council {run_id}: the lead did not call memory_read: {sorted(tool_calls(run_id))}")

        decision = {
            "persona": "Benchmark agent.",
            "cardType": "decision",
            "reviewDecisions": True,
            "defaultPrompt": PROMPT,
            "schedule": "rate(1 hour)",
        }
        plain = create_agent({"name": "bench-am-off", **decision})
        shared = create_agent({"name": "bench-am-on", **decision, "activeMemory": True})
        team = [create_agent({"name": f"bench-specialist-{i}", "persona": f"Specialist {i}."}) for i in range(3)]
        lead = create_agent(
            {
                "name": "bench-lead",
                "persona": "Leads the council.",
                "team": team,
                "defaultPrompt": "Decide on BTC today.",
                "schedule": "rate(1 hour)",
            }
        )

        out = {
            "heartbeat_am_off": scenario(plain, heartbeats, decision_cycle),
            "heartbeat_am_on": scenario(shared, heartbeats, decision_cycle),
            "council": scenario(lead, councils, lead_read_memory),
        }
        _, _, calls, result = fire(plain, _scheduled_time(0))  # redelivered: that scheduled time has run
        if result.get("status") != "duplicate":
            raise RuntimeError(f"a redelivered firing ran again: {result}")
        out["duplicate"] = {op: count for op, count in sorted(calls.items())}
    finally:
        handle.stop()
        emulator.restore()
    return out


def _print_scenario(title: str, s: dict[str, Any]) -> None:
    print(f"\n== {title}")
    print(f"runs measured           {s['runs']}")
    print(
        f"our code per run        median {s['median_ms']:.1f} ms   p95 {s['p95_ms']:.1f} ms   (with the emulator's AWS round trips)"
    )
    print(
        f"  without AWS calls     median {s['own_median_ms']:.1f} ms   p95 {s['own_p95_ms']:.1f} ms   (Python only: handler, claim, prompt, tool loop, card)"
    )
    print(f"AWS calls per run       {s['total_calls_per_run']:.2f}")
    for op, count in s["calls_per_run"].items():
        print(f"  {op:<34} {count:.2f}")
    if s["emulator_errors"] or s["retries_per_run"]:
        errors = "; ".join(f"{n} x {line}" for line, n in s["emulator_errors"].items())
        print(
            f"emulator errors         {s['retries_per_run']:.2f} botocore retries per run (moto's server: {errors or 'none logged'})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heartbeats", type=int, default=50, help="heartbeat runs per Active Memory setting")
    parser.add_argument("--councils", type=int, default=20, help="council runs (a lead and three specialists)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before engram's logger exists: INFO lines per run otherwise

    # powertools prints EMF blobs to stdout even with metrics disabled (cold starts, every 100 values)
    with contextlib.redirect_stdout(io.StringIO()):
        results = bench_runs(args.heartbeats, args.councils)
    print("== runs (HeartbeatFunction handler, one scheduler firing per run, offline model, local emulator; model time excluded)")
    _print_scenario(
        "heartbeat, Active Memory off (decision card, reviewDecisions: get_my_decisions, submit_result)",
        results["heartbeat_am_off"],
    )
    _print_scenario(
        "heartbeat, Active Memory on (the dashboard session's transcript from and back to S3)", results["heartbeat_am_on"]
    )
    _print_scenario(
        "council: a lead and three specialists (specialists in parallel; the lead calls memory_read)", results["council"]
    )
    dup = results["duplicate"]
    ops = ", ".join(f"{op} {c}" for op, c in dup.items())
    print(f"\nredelivered firing (same scheduledTime): {sum(dup.values())} AWS call(s) ({ops}), nothing run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
