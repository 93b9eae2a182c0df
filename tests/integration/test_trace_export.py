"""OpenTelemetry export of run timelines (OB2, issue 37): with TRACING_EXPORT on, a turn's spans
and its jobs' are replayed into the OpenTelemetry SDK with their own ids, parents and times; the
SDK's InMemorySpanExporter stands where the OTLP exporter goes (engram.kernel.otel). Checked: the
span tree, names, kinds, attribute names as the GenAI conventions spell them, no content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind, StatusCode

from engram.kernel import otel
from local.workers import Workers
from tests.integration.test_mcp_tools import acting_agent, connect, servers  # noqa: F401 (the MCP servers fixture)
from tests.integration.test_run_trace import BOTH_TOOLS, CONVENTIONS

SECRET = "sk-ant-api03-" + "Z" * 93 + "AA"


@pytest.fixture
def exported(stack: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The stack exports over OTLP; the SDK's in-memory exporter takes the spans instead."""
    memory = InMemorySpanExporter()
    tracer_provider, ids = otel.provider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(otel, "_exporting", lambda endpoint: (tracer_provider, ids))
    stack.deps.settings = stack.deps.settings.model_copy(
        update={"tracing_export": "otlp", "otlp_endpoint": "http://127.0.0.1:4318", "history_cap": 4}
    )
    yield memory
    tracer_provider.shutdown()


def test_a_turns_spans_reach_the_opentelemetry_sdk_as_recorded(stack, servers, exported):  # noqa: F811
    agent = acting_agent(stack, connect(stack, servers, "market"))
    r = stack.say(agent["id"], f"{BOTH_TOOLS}. My key is {SECRET}")
    assert r.status == 200, r.body
    stored = stack.call("GET", f"/api/runs/{r.data['runId']}/trace").data
    spans = exported.get_finished_spans()

    # one span per recorded span, same ids, names, parents and trace
    assert sorted(f"{s.context.span_id:016x}" for s in spans) == sorted(s["id"] for s in stored["spans"])
    by_id = {f"{s.context.span_id:016x}": s for s in spans}
    assert {f"{s.context.trace_id:032x}" for s in spans} == {stored["traceId"]}
    for recorded in stored["spans"]:
        span = by_id[recorded["id"]]
        assert span.name == recorded["name"]
        assert (f"{span.parent.span_id:016x}" if span.parent else None) == recorded["parentId"]
        assert span.start_time <= span.end_time
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == f"invoke_agent {agent['name']}" and root.kind == SpanKind.INTERNAL
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert len(chats) == 2 and len(tools) == 2 and all(s.kind == SpanKind.CLIENT for s in chats + tools)
    assert all(s.parent.span_id == root.context.span_id for s in chats + tools)
    # the calls of one answer overlap, between the two model calls (start and end times as recorded)
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.end_time <= min(t.start_time for t in tools) and max(t.end_time for t in tools) <= second.start_time
    assert max(t.start_time for t in tools) <= min(t.end_time for t in tools)
    assert all(s.start_time >= root.start_time and s.end_time <= root.end_time for s in spans)

    names = {name for s in spans for name in s.attributes}
    assert {n for n in names if n.startswith("gen_ai.")} <= CONVENTIONS
    assert gen_ai_attributes.GEN_AI_USAGE_INPUT_TOKENS in first.attributes
    assert tuple(first.attributes[gen_ai_attributes.GEN_AI_RESPONSE_FINISH_REASONS]) == ("tool_use",)
    assert {t.attributes[gen_ai_attributes.GEN_AI_TOOL_NAME] for t in tools} == {
        "mcp__market__lookup_price",
        "mcp__market__search_tickets",
    }
    text = json.dumps([dict(s.attributes) for s in spans] + [s.name for s in spans])
    for said in (SECRET, "ETH", "3412.75", "ENG-104"):
        assert said not in text, said
    assert all(s.status.status_code != StatusCode.ERROR for s in spans)


def test_a_job_the_turn_caused_joins_the_same_trace_under_its_root(stack, exported):
    agent = stack.agent()
    run_id = None
    for i in range(8):  # until a save cuts the transcript (history cap 4): a summary job follows
        r = stack.say(agent["id"], f"Note {i} is about the colour c{i}. More words after it.")
        run_id = r.data["runId"]
        if stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["trimmedCount"]:
            break
    exported.clear()
    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
    stored = stack.call("GET", f"/api/runs/{run_id}/trace").data
    turn_root = next(s for s in stored["spans"] if s["parentId"] is None)
    jobs = [s for s in exported.get_finished_spans() if s.name == "job summary"]
    assert jobs, [s.name for s in exported.get_finished_spans()]
    (job,) = [s for s in jobs if f"{s.context.trace_id:032x}" == stored["traceId"]]
    assert f"{job.parent.span_id:016x}" == turn_root["id"] and job.parent.is_remote
    calls = [s for s in exported.get_finished_spans() if s.parent is not None and s.parent.span_id == job.context.span_id]
    assert [c.attributes["gen_ai.operation.name"] for c in calls] == ["chat"]


def test_a_collector_that_is_down_never_fails_the_turn(stack):
    # the real OTLP/HTTP exporter, pointed at a loopback port nothing listens on
    stack.deps.settings = stack.deps.settings.model_copy(update={"tracing_export": "otlp", "otlp_endpoint": "http://127.0.0.1:9"})
    agent = stack.agent()
    r = stack.say(agent["id"], "hello there")
    assert r.status == 200, r.body
    assert stack.call("GET", f"/api/runs/{r.data['runId']}/trace").data["status"] == "succeeded"
    provider, _ = otel._exporting("http://127.0.0.1:9")
    provider.shutdown()
