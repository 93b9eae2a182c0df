"""Injected context with 10, 1,000 and 10,000 stored memories: tokens of the memory sections of
the system prompt, and the time to load and build them (moto in-process; the figures show the
shape — bounded reads and bounded text — not AWS latency)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]
for key, value in {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
}.items():
    os.environ.setdefault(key, value)
os.environ.pop("AWS_ENDPOINT_URL", None)


def main() -> int:
    from moto import mock_aws

    from engram.agents.models import Agent, Workspace
    from engram.engine.prompt import fit_sections
    from engram.engine.timeline import start_sections_traced as start_sections
    from engram.engine.tools import ToolContext
    from engram.facts.models import Fact
    from engram.kernel.ids import tenant_key
    from engram.kernel.model import now_iso
    from engram.kernel.settings import Settings
    from engram.memory.models import Memory
    from engram.memory.section import estimate_tokens
    from engram.roots import chat
    from local.resources import create_resources
    from local.template import load_template

    print("== memory sections of the prompt (agent memory on, a workspace, user facts)")
    print("section tokens = the three sections together, fitted to MEMORY_SECTIONS_TOKEN_BUDGET (2,000);")
    print("rows read = items DynamoDB returned for the three sections (one bounded Query each);")
    print("build = rendering the sections once loaded (the reads themselves are AWS latency: moto scans its")
    print("indexes linearly, real DynamoDB reads a Limit-ed page of a sorted index)")
    print(f"{'stored rows':>12} {'rows read':>10} {'section tokens':>15} {'build median':>15}")
    for n in (10, 1_000, 10_000):
        with mock_aws():
            resources = create_resources(load_template(ROOT / "template.yaml"))
            settings = Settings.from_env(resources.env())
            deps = chat.build(settings)
            t = tenant_key("bench")
            now = now_iso()
            ws = Workspace(id="ws_bench", created_at=now, updated_at=now, name="bench")
            deps.workspaces.put(t, ws)
            agent = Agent(
                id="ag_bench",
                created_at=now,
                updated_at=now,
                name="bench",
                model="offline",
                workspace_id=ws.id,
                agent_memory=True,
            )
            items = []
            for i in range(n):
                for scope, owner in (("agent", agent.id), ("workspace", ws.id)):
                    m = Memory(
                        id=f"m_{scope}{i}",
                        created_at=now,
                        updated_at=now,
                        key=f"{scope}-fact-{i}",
                        scope=scope,
                        value=f"{scope} fact number {i}: the service on host {i} answers on port {8000 + i % 1000}",
                        importance=i % 101,
                    )
                    items.append(deps.memories.item(t, m, owner))
                items.append(
                    deps.facts.item(
                        t,
                        Fact(
                            id=f"f_{i}",
                            created_at=now,
                            updated_at=now,
                            fact=f"user fact number {i} about preferences",
                            last_referenced_at=now,
                        ),
                    )
                )
            deps.table.batch_write(puts=items)
            rows_read = [0]

            def count_rows(parsed=None, rows_read=rows_read, **_kwargs):
                if isinstance(parsed, dict) and "Items" in parsed:
                    rows_read[0] += len(parsed["Items"])

            deps.table.client.meta.events.register("after-call.dynamodb.Query", count_rows)
            render_ms, reads, tokens = [], 0, 0
            for _ in range(5):
                ctx = ToolContext(tenant=t, agent=agent, session_id="dashboard", run_id="run_bench", deps=deps)
                rows_read[0] = 0
                loaded = start_sections(deps.sections, ctx, deps.executor)
                for future in loaded.values():
                    future.result()
                reads = rows_read[0]
                start = time.perf_counter()
                view = fit_sections(
                    deps.sections,
                    loaded,
                    lambda name, err: print("section failed:", name, err),
                    budget_tokens=settings.memory_sections_token_budget,
                )
                render_ms.append((time.perf_counter() - start) * 1000)
                for f in ctx.background:
                    f.result()
                tokens = estimate_tokens(view.text)
            print(f"{n:>12,} {reads:>10,} {tokens:>15,} {statistics.median(render_ms):>12.2f} ms")
            notes = [line for line in view.text.splitlines() if "memory_recall" in line]
            for note in notes:
                print(f"{'':>12} {note[:110]}")
            if tokens > settings.memory_sections_token_budget:
                print(f"over the budget of {settings.memory_sections_token_budget} tokens")
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
