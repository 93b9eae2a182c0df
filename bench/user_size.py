"""`make bench` (a user's size): a chat turn for a user with 10,000 archived turns, 1,000 memories
and 500 runs against a fresh user's, on one local stack (offline model, no background workers).

Issue 39 asks that a turn's cost not depend on how much its user has stored (aim: within 1.2x of
a fresh user's). The big user's rows are written as their repositories write them (the archive's
items as a turn's commit writes them, memories, run records), then both users take turns in
alternation (so a slow stretch of the shared machine hits both), and the median of each is
printed with the machine's load average, which a 2-core machine shared by other work moves.

A fourth user, "shown", has only the memories the big user's prompt shows (90): it tells growth
with size (big vs shown) from the cost of showing memories (shown vs fresh).

    python -m bench.user_size [--archived 10000] [--memories 1000] [--runs 500] [--turns 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

AIM = 1.2
SHOWN = 90  # the bench's memories the agent section shows at the default budget
MESSAGES = ("what do you know about me?", "remember that I prefer green tea", "what time is it?", "hello again")


def fill(deps, tenant: str, agent_id: str, archived: int, memories: int, runs: int) -> None:
    """The big user's rows: `archived` archive items (turns of 40 sessions), `memories` agent
    memories and `runs` finished chat runs, each as its repository writes it."""
    from engram.kernel.model import now_iso
    from engram.memory.models import Memory, memory_id
    from engram.runs.models import Run

    now = now_iso()
    messages = [{"role": "user", "content": [{"type": "text", "text": ""}]}]
    items = []
    for i in range(archived):
        messages[0]["content"][0]["text"] = f"turn {i}: I went hiking near lake number {i % 97} with my friend {i % 13}"
        items += deps.archive.items_for_turn(tenant, agent_id, f"s{i % 40}", f"run_arch{i:06d}", messages, now)
    deps.archive.put_many(tenant, agent_id, items)
    rows = []
    for i in range(memories):
        key = f"note-{i:05d}"
        memory = Memory(
            id=memory_id("agent", agent_id, key),
            key=key,
            value=f"something worth remembering about item {i}",
            scope="agent",
            importance=i % 100,
            created_at=now,
            updated_at=now,
        )
        rows.append(deps.memories.item(tenant, memory, agent_id))
    for start in range(0, len(rows), 25):
        deps.memories.table.batch_write(puts=rows[start : start + 25])
    for i in range(runs):
        run = Run(
            id=f"run_big{i:06d}",
            created_at=now,
            updated_at=now,
            agent_id=agent_id,
            kind="chat",
            status="succeeded",
            prompt=f"prompt {i}",
            session_id="dashboard",
            result={"reply": f"reply {i}"},
        )
        deps.runs.put(tenant, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archived", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args(argv)
    from engram.kernel.ids import tenant_key
    from local.apigw import invoke_http
    from local.stack import start_stack

    print(
        f"== a user's size: a turn with {args.archived:,} archived turns, {args.memories:,} memories and "
        f"{args.runs:,} runs vs a fresh user (offline model)"
    )
    handle = start_stack(port=0, model_provider="offline", workers=False)
    try:

        def call(user: str, method: str, path: str, body: dict | None = None) -> dict:
            status, _, out = invoke_http(handle.functions, method, path, body=json.dumps(body) if body else None, user=user)
            if status >= 300:
                raise RuntimeError(f"{method} {path}: {status} {out[:300]!r}")
            return json.loads(out)["data"]

        # "medium": a tenth of the archive and the runs, and more memories than a prompt reads (201):
        # a cost that follows the user's size shows between medium and big, one that follows what a
        # turn reads (bounded) does not.
        # "shown": a fresh user with as many memories as the big user's prompt shows (90 at the
        # default budget), all of them shown: big vs shown is growth with size alone, shown vs
        # fresh the cost of showing memories.
        sizes = {
            "fresh": (0, 0, 0),
            "shown": (0, SHOWN, 0),
            "medium": (args.archived // 10, max(args.memories // 4, 250), args.runs // 10),
            "big": (args.archived, args.memories, args.runs),
        }
        agents = {
            user: call(user, "POST", "/api/agents", {"name": "Size", "persona": "Brief.", "agentMemory": True}) for user in sizes
        }
        deps = handle.functions["ChatFunction"].module().ROOT.deps
        started = time.perf_counter()
        for user, (archived, memories, runs) in sizes.items():
            fill(deps, tenant_key(user), agents[user]["id"], archived, memories, runs)
        print(f"  the users' rows written in {time.perf_counter() - started:.1f} s", flush=True)
        times: dict[str, list[float]] = {user: [] for user in sizes}
        last: dict[str, str] = {}
        for i in range(args.turns * len(sizes)):
            user = list(sizes)[i % len(sizes)]
            start = time.perf_counter()
            message = MESSAGES[(i // len(sizes)) % len(MESSAGES)]
            out = call(user, "POST", f"/api/agents/{agents[user]['id']}/sessions/dashboard/messages", {"message": message})
            times[user].append((time.perf_counter() - start) * 1000)
            last[user] = out["runId"]
        # the agent section's rows read on each user's last turn (its timeline's memory.read span)
        read = {
            user: next(
                (
                    s["attributes"].get("engram.memory.rows", 0)
                    for s in call(user, "GET", f"/api/runs/{run}/trace")["spans"]
                    if s["name"] == "memory.read agent_memory"
                ),
                0,
            )
            for user, run in last.items()
        }
    finally:
        handle.stop()
    medians = {user: statistics.median(t[1:]) for user, t in times.items()}  # the first turn fills a container's caches
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    for user, (archived, memories, runs) in sizes.items():
        print(
            f"  {user:<6} ({archived:>6,} archived, {memories:>5,} memories, {runs:>4} runs): turn median "
            f"{medians[user]:.0f} ms ({medians[user] / medians['fresh']:.2f}x of fresh), first turn {times[user][0]:.0f} ms, "
            f"{read[user]} memory rows read"
        )
    print(
        f"  big vs medium {medians['big'] / medians['medium']:.2f}x, big vs shown {medians['big'] / medians['shown']:.2f}x "
        f"(aim {AIM}x vs fresh); load average {load}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
