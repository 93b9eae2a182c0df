"""OB2: a finished run trace (engram.kernel.trace) replayed into the OpenTelemetry SDK, with its
spans' own ids, parents and start and end times, and exported over OTLP/HTTP.

Imported only when the stack exports traces (TRACING_EXPORT otlp or xray-adot, engine.timeline);
with it off nothing of OpenTelemetry's SDK is loaded (tests/unit/test_cold_start_imports.py). The
provider is made once per container; each export is flushed before the invocation returns (Lambda
may freeze the container after it). "xray-adot" sends to the ADOT collector layer's endpoint in the
same sandbox (http://localhost:4318), which forwards to X-Ray; "otlp" to OTEL_EXPORTER_OTLP_ENDPOINT.
"""

from __future__ import annotations

import threading
from functools import lru_cache

from opentelemetry import trace as api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from engram.kernel import trace as t
from engram.kernel.settings import Settings

ADOT_ENDPOINT = "http://localhost:4318"  # the ADOT collector extension's OTLP/HTTP receiver
# The flush waits at most this long at the end of an invocation (a collector that does not answer
# costs a turn this much, never more); the exporter gives up on a request after _EXPORT_TIMEOUT_S.
_FLUSH_MS = 1000
_EXPORT_TIMEOUT_S = 2.0


class ReplayIds(IdGenerator):
    """The SDK takes each span's id (and the trace's) from the recorded span being replayed."""

    def __init__(self) -> None:
        self.span_id = 0
        self.trace_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


_lock = threading.Lock()


def provider(ids: ReplayIds | None = None) -> tuple[TracerProvider, ReplayIds]:
    """A tracer provider that replays recorded ids (the caller adds its span processor)."""
    ids = ids or ReplayIds()
    return TracerProvider(resource=Resource.create({"service.name": "engram"}), id_generator=ids), ids


def replay(trace: t.Trace, tracer_provider: TracerProvider, ids: ReplayIds) -> int:
    """Every finished span of `trace` into `tracer_provider`, parents first; the number replayed."""
    tracer = tracer_provider.get_tracer("engram")
    stored = trace.stored(max_bytes=1 << 30)  # every span: the size cap is the stored copy's
    base_ns = int(float(_wall(trace)) * 1e9)
    made: dict[str, api.Span] = {}
    count = 0
    with _lock:
        ids.trace_id = int(trace.trace_id, 16)
        for record in stored["spans"]:  # type: ignore[attr-defined]
            span_id, parent_id = str(record["id"]), record.get("parentId")
            if parent_id in made:
                context = api.set_span_in_context(made[str(parent_id)])
            elif parent_id:  # a job's root: under the turn's root, recorded by the turn
                remote = SpanContext(ids.trace_id, int(str(parent_id), 16), True, TraceFlags(TraceFlags.SAMPLED))
                context = api.set_span_in_context(NonRecordingSpan(remote))
            else:
                context = None
            ids.span_id = int(span_id, 16)
            kind = SpanKind.CLIENT if record["kind"] in t.CLIENT_KINDS else SpanKind.INTERNAL
            attributes = record["attributes"]
            span = tracer.start_span(
                str(record["name"]),
                context=context,
                kind=kind,
                attributes=attributes,
                start_time=base_ns + int(float(record["startMs"]) * 1e6),
            )
            if record.get("status") == "error":
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=base_ns + int(float(record["endMs"]) * 1e6))
            made[span_id] = span
            count += 1
    return count


def _wall(trace: t.Trace) -> float:
    return trace.wall_start


@lru_cache(maxsize=1)
def _exporting(endpoint: str) -> tuple[TracerProvider, ReplayIds]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    tracer_provider, ids = provider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=_EXPORT_TIMEOUT_S))
    )
    return tracer_provider, ids


def endpoint_of(settings: Settings) -> str:
    return ADOT_ENDPOINT if settings.tracing_export == "xray-adot" else settings.otlp_endpoint


def export(trace: t.Trace, settings: Settings) -> None:
    endpoint = endpoint_of(settings)
    if not endpoint:
        return
    tracer_provider, ids = _exporting(endpoint)
    replay(trace, tracer_provider, ids)
    tracer_provider.force_flush(_FLUSH_MS)
