"""The stream's events (ST2, ST6): one pydantic model per type (engram.engine.events) that the
server builds every event from; docs/streaming.md's table and the Python client's types say
the same fields; no event is over API Gateway's 128 KB, whatever the turn holds."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest

from engram.engine import events
from engram.engine.events import MAX_EVENT_BYTES, TURN_EVENTS, TurnEvents, completed_event, size_of
from engram_client import streaming as client_streaming

ROOT = Path(__file__).resolve().parents[2]
COMMON = {"type", "runId", "seq"}
CLIENT_TYPES = {
    "turn.started": client_streaming.TurnStarted,
    "text.delta": client_streaming.TextDelta,
    "tool.started": client_streaming.ToolStarted,
    "tool.finished": client_streaming.ToolFinished,
    "turn.completed": client_streaming.TurnCompleted,
    "turn.failed": client_streaming.TurnFailed,
    "turn.keepalive": client_streaming.TurnKeepalive,
    "approval.requested": client_streaming.ApprovalRequested,
    "approval.decided": client_streaming.ApprovalDecided,
}


def _fields(model: type[events.StreamEvent]) -> tuple[str, set[str], set[str]]:
    """(type, every field's wire name, the required ones)."""
    kind = str(model.model_fields["type"].default)
    names = {f.alias or n for n, f in model.model_fields.items()}
    required = {f.alias or n for n, f in model.model_fields.items() if f.is_required()} | {"type"}
    return kind, names, required


def _documented() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "streaming.md").read_text(encoding="utf-8")
    table = text.split("## Events you receive", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        kind = re.fullmatch(r"`([a-z]+\.[a-z]+)`", cells[0]) if len(cells) == 2 else None
        if not kind:
            continue
        names: set[str] = set()
        for span in re.findall(r"`([^`]*)`", cells[1]):
            pieces = [span.split(":", 1)[0]] if ":" in span else span.split(",")
            names |= {p.strip().rstrip("?") for p in pieces if re.fullmatch(r"\s*[a-zA-Z]+\??\s*", p)}
        out[kind.group(1)] = names
    return out


def test_every_event_model_is_documented_and_typed_in_the_client():
    documented = _documented()
    assert set(documented) == {_fields(m)[0] for m in TURN_EVENTS} == set(CLIENT_TYPES)
    for model in TURN_EVENTS:
        kind, names, required = _fields(model)
        assert documented[kind] == names - COMMON, kind
        hints = typing.get_type_hints(CLIENT_TYPES[kind], include_extras=True)
        assert set(hints) == names, kind
        assert {k for k, h in hints.items() if typing.get_origin(h) is not typing.NotRequired} == required, kind


class Kept:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


def test_the_message_is_not_echoed_in_full_and_long_text_is_split():
    sink = Kept()
    turn = TurnEvents(sink, "run_big", clock=lambda: 0.0)
    message = "é" * 30_000
    turn.started(agent_id="ag_1", session_id="s", kind="chat", trigger="socket", message=message)
    turn.text("🙂" * 100_000)  # one piece as a provider might hand it over
    turn.flush()
    started, *deltas = sink.events
    assert started["messageChars"] == 30_000 and message.startswith(started["message"]) and len(started["message"]) < 30_000
    assert "".join(d["text"] for d in deltas) == "🙂" * 100_000 and len(deltas) > 1
    assert max(size_of(e) for e in sink.events) <= MAX_EVENT_BYTES


def test_a_large_tool_input_is_left_to_the_run():
    sink = Kept()
    TurnEvents(sink, "run_in").tool_started({"id": "toolu_1", "name": "save", "input": {"text": "x" * 200_000}})
    (event,) = sink.events
    assert event["input"] == {} and event["inputTruncated"] is True and size_of(event) < 1000


@pytest.mark.parametrize("calls, result_chars", [(20, 16_000), (3, 200_000), (5_000, 40)])
def test_turn_completed_fits_whatever_the_tool_calls_and_reply(calls, result_chars):
    public = {
        "runId": "run_x",
        "sessionId": "dashboard",
        "reply": "ü" * 90_000,
        "toolCalls": [
            {"name": "huge", "input": {"n": i, "pad": "y" * 50}, "result": "r" * result_chars, "isError": False}
            for i in range(calls)
        ],
        "usage": {"inputTokens": 1, "outputTokens": 2},
    }
    event = completed_event("run_x", 9, public).wire()
    assert size_of(event) <= MAX_EVENT_BYTES
    assert event["type"] == "turn.completed" and event["seq"] == 9 and event["usage"] == public["usage"]
    assert public["reply"].startswith(event["reply"])  # whole, or cut and said so
    assert (event["reply"] == public["reply"]) != bool(event.get("replyTruncated"))
    shown = event["toolCalls"]
    assert len(shown) + event.get("toolCallsOmitted", 0) == calls
    for call in shown:
        if call.get("resultTruncated"):
            assert call["resultChars"] == result_chars and call["ref"] == "/api/runs/run_x"


def test_a_small_turn_completed_is_the_turns_answer_unchanged():
    public = {
        "runId": "run_s",
        "sessionId": "s",
        "reply": "hi",
        "toolCalls": [{"name": "t", "input": {}, "result": "ok"}],
        "usage": {},
    }
    event = completed_event("run_s", 3, public).wire()
    assert event == {
        "type": "turn.completed",
        "runId": "run_s",
        "seq": 3,
        "sessionId": "s",
        "reply": "hi",
        "toolCalls": public["toolCalls"],
        "usage": {},
    }
