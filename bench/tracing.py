"""`make bench`: what a run's timeline costs (OB1, OB2, issue 37).

1. Recording CPU per turn: the engine's own timeline calls for a typical turn (the lease wait, three
   memory section reads, the transcript GET and PUT, two model calls, two parallel MCP calls, a
   memory write, the commit with the stored trace serialised into its item), and for a long turn
   (12 rounds of 4 tools), CPU time (time.process_time) per turn over many repetitions.
2. Span bytes per turn: the trace item's JSON for real turns of the offline model on moto (a plain reply; a turn with a tool call and a memory write).
3. Cold start with export off and on: the chat handler's import in a fresh interpreter with
   TRACING_EXPORT=off and =otlp (the SDK is never imported at init either way), and what the
   first exported turn pays on top when export is on (the SDK and the OTLP exporter imported,
   the provider made, the trace replayed).

    python -m bench.tracing [--turns 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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


def _record_turn(rounds: int, tools_per_round: int) -> int:
    """The engine's timeline calls for one turn (as engine.turn and engine.loop make them); the
    stored item's size."""
    from engram.agents.models import Agent
    from engram.engine import timeline
    from engram.engine.providers.base import ModelResponse
    from engram.engine.tools import ToolContext, ToolOutcome
    from engram.kernel import trace as t
    from engram.kernel.settings import Settings
    from engram.usage.models import Usage

    agent = Agent(id="ag_1", name="Ada", model="claude-sonnet-4-6", created_at="t", updated_at="t")
    settings = Settings()
    with timeline.lease_wait("run_01m8dv13er8phmg4zpsn6kd9b4", "dashboard", {"kind": "chat"}, time.monotonic()) as trace:
        pass
    ctx = ToolContext(tenant="t", agent=agent, session_id="dashboard", run_id="run_1", state={timeline.TRACE: trace})
    timeline.for_agent(trace, agent)
    for section in ("agent_memory", "workspace_memory", "user_facts"):
        with trace.span(f"memory.read {section}", t.MEMORY_READ) as span:
            span.put({t.OPERATION: "retrieval", t.DATA_SOURCE: section, "engram.memory.section": section})
            span.set(engram__memory__rows=12)
    with timeline.step(ctx, "transcript.get"):
        pass
    usage = Usage(input_tokens=1800, output_tokens=120, cache_read_tokens=1500, cost_usd=0.0021)
    for round_no in range(rounds + 1):
        stop = "tool_use" if round_no < rounds else "end_turn"
        with timeline.model_call(trace, model=agent.model, provider="anthropic", max_tokens=4096) as call:
            call.answered(ModelResponse(content=[], stop_reason=stop, model=agent.model), usage)
        if round_no < rounds:
            uses = [
                {"id": f"toolu_{round_no}_{i}", "name": f"mcp__market__tool_{i}", "input": {}} for i in range(tools_per_round)
            ]
            outcome = ToolOutcome("x", record={"connection": "market", "durationMs": 40.0, "bytes": 420})
            timeline.toolset_calls(ctx, uses, lambda n=len(uses), o=outcome: [o] * n)
    timeline.registry_call(ctx, {"id": "toolu_m", "name": "memory_store"}, lambda: ToolOutcome({"stored": True}))
    with timeline.step(ctx, "transcript.put"):
        pass
    from engram.runs.models import Run
    from engram.runs.traces import TraceRepository

    traces = TraceRepository(table=None, expiry=lambda run: None)  # type: ignore[arg-type]
    run = Run(id="run_01m8dv13er8phmg4zpsn6kd9b4", agent_id="ag_1", created_at="t", updated_at="t")

    class _Deps:
        settings = Settings()
        runs = type("R", (), {"traces": traces})()

    with timeline.committing(ctx, _Deps(), run, []) as items:  # type: ignore[arg-type]
        size = len(str(items[-1]["trace"]))
    timeline.finish(ctx, settings)
    return size


def recording_cpu(turns: int) -> None:
    print("== recording CPU per turn (the engine's timeline calls and the stored item's JSON; process_time)")
    print(f"{'turn':>30} {'spans':>6} {'CPU per turn':>13} {'item bytes':>11}")
    for label, rounds, tools in (("typical (2 calls, 2 tools)", 1, 2), ("long (12 rounds x 4 tools)", 11, 4)):
        _record_turn(rounds, tools)  # warm (imports, pydantic validators)
        samples = []
        size = 0
        for _ in range(5):
            start = time.process_time()
            for _ in range(turns // 5):
                size = _record_turn(rounds, tools)
            samples.append((time.process_time() - start) / (turns // 5))
        spans = 1 + 1 + 3 + 2 + (rounds + 1) + rounds * tools + 1 + 1
        print(f"{label:>30} {spans:>6} {statistics.median(samples) * 1000:>11.3f}ms {size:>11,}")


def span_bytes() -> None:
    """Real turns of the offline model on moto: the stored trace item's size."""
    from moto import mock_aws

    from engram.conversations import chat
    from engram.facts import service as facts
    from engram.kernel.ids import tenant_key
    from engram.kernel.settings import Settings
    from engram.memory import service as memory_service
    from engram.roots import heartbeat
    from local.emulator import patch_moto
    from local.resources import create_resources
    from local.template import load_template

    patch_moto()
    print("== span bytes per turn (real turns, offline model on moto, the trace item as stored)")
    print(f"{'turn':>40} {'spans':>6} {'bytes':>8}")
    with mock_aws():
        resources = create_resources(load_template(ROOT / "template.yaml"))
        deps = heartbeat.build(Settings.from_env(resources.env()))
        tenant = tenant_key("bench")
        from engram.agents.models import AgentCreate
        from engram.agents.service import create_agent

        agent = create_agent(
            deps, tenant, AgentCreate.model_validate({"name": "Ada", "persona": "You help.", "agentMemory": True})
        )
        for i in range(30):  # rows for the memory sections: their reads' spans count rows and tokens
            memory_service.upsert_memory(
                deps,
                tenant,
                scope="agent",
                owner_id=str(agent["id"]),
                key=f"note-{i}",
                value=f"The deploy window {i} is Tuesday.",
                source="manual",
            )
        for i in range(10):
            facts.add_fact(
                deps.facts,
                deps.settings,
                tenant,
                f"I prefer tea number {i} in the morning",
                source="profile",
                confidence="asserted",
            )
        for label, message in (
            ("a plain reply", "hello there, how are you today?"),
            ("a tool call (current time)", "what time is it?"),
            ("a memory write (remember)", "remember that I prefer green tea"),
        ):
            outcome = chat.run_chat_turn(deps, tenant, str(agent["id"]), "dashboard", message)
            (part,) = deps.runs.traces.parts(tenant, str(agent["id"]), outcome.run.id)
            text = json.dumps(part, separators=(",", ":"), ensure_ascii=False)
            print(f"{label:>40} {len(part['spans']):>6} {len(text.encode()):>8,}")  # type: ignore[arg-type]
        # the one piece of recording that is not bookkeeping: each section's rows rendered once more
        # for their tokens (engram.memory.tokens), in the pool beside the transcript GET
        from engram.agents.models import Agent
        from engram.engine.tools import ToolContext

        ctx = ToolContext(tenant=tenant, agent=Agent.model_validate(agent), session_id="dashboard", run_id="run_b", deps=deps)
        loaded = [(section, section.load(ctx)) for section in deps.sections]
        start = time.process_time()
        for _ in range(200):
            for section, rows in loaded:
                section.render(rows, None)
        rows = sum(len(r) for _, r in loaded if isinstance(r, list))
        print(f"   the sections' token count ({rows} rows): {(time.process_time() - start) / 200 * 1000:.3f} ms of CPU per turn")


_IMPORT = """
import importlib.util, sys, time
sys.path[:0] = [{task_root!r}, {layer!r}]
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", {task_root!r} + "/app.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
init = time.perf_counter() - start
at_init = "opentelemetry.sdk" in sys.modules
start = time.perf_counter()
{first_export}
print(init, time.perf_counter() - start, at_init)
"""
_FIRST_EXPORT = """
from engram.kernel import otel
from engram.kernel.settings import Settings
from engram.engine import timeline
with timeline.lease_wait("run_01m8dv13er8phmg4zpsn6kd9b4", "dashboard", {}, time.monotonic()) as trace:
    pass
provider, ids = otel._exporting("http://127.0.0.1:9")  # made as the first export makes it (nothing listens)
otel.replay(trace, provider, ids)
"""


def cold_start(repeats: int = 9) -> None:
    print("== cold start of the chat handler, export off vs on (fresh interpreters, the venv's packages, the two")
    print("   modes alternated so that the machine's load falls on both alike)")
    print(f"{'TRACING_EXPORT':>15} {'init median':>12} {'first export adds':>18} {'SDK at init':>12}")
    inits: dict[str, list[float]] = {"off": [], "otlp": []}
    firsts: dict[str, list[float]] = {"off": [], "otlp": []}
    loaded = {"off": False, "otlp": False}
    for _ in range(repeats):
        for mode in ("off", "otlp"):
            code = _IMPORT.format(
                task_root=str(ROOT / "functions" / "chat"),
                layer=str(ROOT / "layers" / "core"),
                first_export=_FIRST_EXPORT if mode != "off" else "",
            )
            env = {
                **os.environ,
                "TRACING_EXPORT": mode,
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9" if mode != "off" else "",
                "PYDANTIC_DISABLE_PLUGINS": "__all__",
            }
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            init, first, sdk = out.stdout.split()
            inits[mode].append(float(init))
            firsts[mode].append(float(first))
            loaded[mode] = loaded[mode] or sdk == "True"
    for mode in ("off", "otlp"):
        first = f"{statistics.median(firsts[mode]) * 1000:.0f}ms" if mode != "off" else "-"
        print(f"{mode:>15} {statistics.median(inits[mode]) * 1000:>10.0f}ms {first:>18} {str(loaded[mode]):>12}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args(argv)
    recording_cpu(args.turns)
    span_bytes()
    cold_start()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
