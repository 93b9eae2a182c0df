"""`make bench` (local stack at scale): a chat turn's time with 10, 1,000 and 10,000 rows per scope.

The local stack (`python -m local.stack`'s `start_stack`, offline model, no background workers)
gets one agent with agent memory on, in a workspace, and its user; each scope (the agent's
memories, the workspace's memories, the user's facts) is filled with N rows, written as the
repositories write them (25 to a BatchWriteItem: the API's quotas would stop a user at 1,000).
Then 20 chat turns; the median turn time is printed per N, and its ratio to N = 10 against the aim
(at most 2x at 10,000: the turn reads ~260 rows whatever N is, so the emulator must not scan).

    python -m bench.local_scale [--rows 10 1000 10000] [--turns 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

AIM = 2.0
USER = "scale"
MESSAGES = ("what do you know about me?", "remember that I prefer green tea", "what time is it?", "hello again")


def fill(deps, tenant: str, agent_id: str, workspace_id: str, rows: int) -> None:
    """`rows` agent memories, workspace memories and facts, as their repositories store them."""
    from engram.facts.models import Fact
    from engram.kernel.model import now_iso
    from engram.memory.models import Memory, memory_id

    now = now_iso()
    items = []
    for scope, owner in (("agent", agent_id), ("workspace", workspace_id)):
        for i in range(rows):
            key = f"note-{i:05d}"
            memory = Memory(
                id=memory_id(scope, owner, key),
                key=key,
                value=f"row {i} of the {scope} scope: something worth remembering about item {i}",
                scope=scope,
                importance=i % 100,
                created_at=now,
                updated_at=now,
            )
            items.append(deps.memories.item(tenant, memory, owner))
    for i in range(rows):
        fact = Fact(id=f"fact_{i:06d}", fact=f"I have a preference numbered {i}", created_at=now, updated_at=now)
        items.append(deps.facts.item(tenant, fact))
    table = deps.memories.table
    for start in range(0, len(items), 25):
        table.batch_write(puts=items[start : start + 25])


def turn_ms(rows: int, turns: int) -> float:
    from engram.kernel.ids import tenant_key
    from local.apigw import invoke_http
    from local.stack import start_stack

    handle = start_stack(port=0, model_provider="offline", workers=False)
    try:

        def call(method: str, path: str, body: dict | None = None) -> dict:
            status, _, out = invoke_http(handle.functions, method, path, body=json.dumps(body) if body else None, user=USER)
            if status >= 300:
                raise RuntimeError(f"{method} {path}: {status} {out[:300]!r}")
            return json.loads(out)["data"]

        workspace = call("POST", "/api/workspaces", {"name": "Scale"})
        agent = call(
            "POST", "/api/agents", {"name": "Scale", "persona": "Brief.", "workspaceId": workspace["id"], "agentMemory": True}
        )
        deps = handle.functions["ChatFunction"].module().ROOT.deps
        started = time.perf_counter()
        fill(deps, tenant_key(USER), agent["id"], workspace["id"], rows)
        print(f"  {rows:>6} rows a scope: written in {time.perf_counter() - started:.1f} s", flush=True)
        times, failures = [], []
        for i in range(turns):
            start = time.perf_counter()
            try:
                call("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": MESSAGES[i % len(MESSAGES)]})
            except RuntimeError as err:  # a turn past its budget is a finding, not a crash of the bench
                failures.append(str(err)[-120:])
            times.append((time.perf_counter() - start) * 1000)
        if failures:
            print(f"  {rows:>6} rows a scope: {len(failures)} of {turns} turns failed, e.g. {failures[0]}", flush=True)
        return statistics.median(times), len(failures)
    finally:
        handle.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args(argv)
    print("== the local stack at scale: a chat turn with N rows in each memory scope (offline model)")
    results = {rows: turn_ms(rows, args.turns) for rows in args.rows}
    medians = {rows: median for rows, (median, _) in results.items()}
    failed = sum(count for _, count in results.values())
    base = medians[min(medians)]
    for rows, median in medians.items():
        print(f"  {rows:>6} rows a scope: turn median {median:.0f} ms ({median / base:.2f}x of {min(medians)} rows)")
    worst = max(medians.values()) / base
    passed = worst <= AIM and failed == 0
    print(f"verdict: {'PASS' if passed else 'FAIL'}: at most {worst:.2f}x (aim {AIM:.0f}x), {failed} failed turns")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
