"""The span recorder (engram.kernel.trace): the stored form a page draws, the size cap and its note,
a job's part merged onto the turn's time axis, and recording with export off loading nothing of
OpenTelemetry's SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engram.kernel import trace as t

ROOT = Path(__file__).resolve().parents[2]


def _turn(spans: int) -> t.Trace:
    trace = t.Trace("run_01m8dv13er8phmg4zpsn6kd9b4")
    root = trace.start("invoke_agent a", t.AGENT, span_id=trace.root_id)
    for i in range(spans):
        with trace.span(f"execute_tool tool_{i}", t.TOOL) as span:
            span.set(gen_ai__tool__name=f"tool_{i}", engram__tool__bytes=i)
            trace.end(trace.start("memory.write agent", t.MEMORY_WRITE, parent=span))
    trace.end(root)
    return trace


def test_the_stored_form_lists_spans_in_start_order_with_parent_depth_and_offsets():
    stored = _turn(3).stored()
    spans = stored["spans"]
    assert isinstance(spans, list) and len(spans) == 7
    assert [s["depth"] for s in spans] == [0, 1, 2, 1, 2, 1, 2]
    assert spans[0]["parentId"] is None and all(s["parentId"] == spans[0]["id"] for s in spans if s["depth"] == 1)
    assert all(a["startMs"] <= b["startMs"] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[1]["attributes"] == {"gen_ai.tool.name": "tool_0", "engram.tool.bytes": 0}
    assert stored["truncated"] is False and stored["droppedSpans"] == 0
    # the trace id carries the run's creation second first (X-Ray's rule), then a digest
    assert stored["traceId"] == t.trace_id("run_01m8dv13er8phmg4zpsn6kd9b4") and len(str(stored["traceId"])) == 32
    assert int(str(stored["traceId"])[:8], 16) > 1_700_000_000


def test_past_the_size_cap_the_latest_spans_are_dropped_never_a_kept_spans_parent():
    stored = _turn(200).stored(max_bytes=6_000)
    spans = stored["spans"]
    assert isinstance(spans, list)
    assert stored["truncated"] is True and stored["droppedSpans"] == 401 - len(spans)
    ids = {s["id"] for s in spans}
    assert spans[0]["kind"] == t.AGENT and all(s["parentId"] in ids for s in spans[1:])
    assert sum(len(str(s)) for s in spans) < 12_000


def test_a_failed_span_says_its_error_type_and_an_open_one_ends_when_written():
    trace = t.Trace("run_x")
    trace.start("invoke_agent a", t.AGENT, span_id=trace.root_id)
    try:
        with trace.span("chat m", t.CHAT):
            raise TimeoutError("slow")
    except TimeoutError:
        pass
    root, chat = trace.stored()["spans"]  # type: ignore[misc]
    assert chat["status"] == "error" and chat["attributes"] == {"error.type": "TimeoutError"}
    assert root["open"] is True and root["endMs"] >= chat["endMs"]


def test_a_jobs_part_is_placed_on_the_turns_time_axis_under_its_root():
    turn = _turn(1)
    job = t.Trace(turn.run_id, root_id="ab" * 8, source="summary")
    job.wall_start = turn.wall_start + 2.0  # two seconds after the turn began
    job.end(job.start("job summary", t.JOB, parent=t.root_span_id(turn.run_id), span_id=job.root_id))
    merged = t.merge([job.stored(), turn.stored()])
    assert merged["parts"] == ["turn", "summary"]
    spans = merged["spans"]
    assert isinstance(spans, list)
    (fold,) = [s for s in spans if s["kind"] == t.JOB]
    assert fold["parentId"] == turn.root_id and fold["depth"] == 1 and fold["job"] == "summary"
    assert 1990 <= fold["startMs"] <= 2100
    assert t.merge([]) == {}


def test_recording_with_export_off_loads_nothing_of_opentelemetry():
    probe = """
import sys
from engram.engine import timeline
from engram.kernel.settings import Settings
from engram.engine.tools import ToolContext
from engram.agents.models import Agent
agent = Agent(id="ag_1", name="a", model="m", created_at="t", updated_at="t")
with timeline.lease_wait("run_1", "dashboard", {}, 0.0) as trace:
    pass
ctx = ToolContext(tenant="t", agent=agent, session_id="dashboard", run_id="run_1", state={timeline.TRACE: trace})
timeline.finish(ctx, Settings())
assert trace.spans[0].end is not None
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "core")},
    )
    assert out.stdout.strip() == "[]"


def test_a_council_members_root_names_the_run_it_worked_for():
    from engram.engine import timeline

    fields = {"kind": "council_member", "council_run_id": "run_lead", "parent_run_id": None}
    trace = timeline.begin_turn("run_member", None, fields, 0.0)
    (root,) = trace.stored()["spans"]  # type: ignore[misc]
    assert root["attributes"]["engram.run.kind"] == "council_member"
    assert root["attributes"]["engram.run.council_id"] == "run_lead" and "engram.run.parent_id" not in root["attributes"]
