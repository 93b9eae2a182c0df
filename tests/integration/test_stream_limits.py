"""AWS's limits on the WebSocket API (ST6), through the chat function's handler: every malformed
frame is an error frame, never a failed invocation; no event a turn posts is over 128 KB (the fake
management API refuses those, as API Gateway does), so the client sees the turn end."""

from __future__ import annotations

import base64
import json

import pytest

from tests.integration import test_mcp_tools
from tests.integration.test_mcp_tools import acting_agent, connect
from tests.integration.test_stream_api import Socket

servers = test_mcp_tools.servers


@pytest.mark.parametrize(
    "frame, code, field",
    [
        ("[" * 10_000 + "]" * 10_000, "invalid_body", "body"),  # json raises RecursionError on this
        ('{"action": "turn", "a": ' + "[" * 5_000 + "]" * 5_000 + "}", "validation_error", None),
        ('{"action": "subscribe", "agentId": "\\ud800", "sessionId": "s"}', "invalid_body", "body"),
        ("{" * 40_000, "payload_too_large", "body"),
        ("", "validation_error", "action"),
        ("null", "validation_error", "action"),
        ("[1, 2]", "validation_error", "action"),
        ('{"action": 7}', "validation_error", "action"),
        ('{"action": "turn", "agentId": ["x"]}', "validation_error", None),
        ("\x00\x01", "invalid_body", "body"),
    ],
)
def test_every_malformed_frame_gets_an_error_frame(stack, frame, code, field):
    socket = Socket(stack)
    answer = socket._invoke("MESSAGE", body=frame)
    assert answer["statusCode"] == 200
    error = json.loads(answer["body"])
    assert error["type"] == "error" and error["error"]["code"] == code
    if field:
        assert error["error"]["field"] == field


def test_frames_that_are_not_utf8_text_get_an_error_frame(stack):
    socket = Socket(stack)
    for body in (base64.b64encode(b"\xff\xfe{").decode(), "not base64 at all!"):
        answer = socket._invoke("MESSAGE", body=body, isBase64Encoded=True)
        assert json.loads(answer["body"])["error"]["code"] == "invalid_body"


def test_a_turn_with_a_huge_tool_result_and_a_long_message_ends_on_the_socket(stack, servers):
    agent = acting_agent(stack, connect(stack, servers, "faulty", "faulty"))
    socket = Socket(stack)
    message = "é" * 14_000 + " use huge with 40000"  # 28 KB of UTF-8: under the 32 KB frame
    frame = {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "message": message, "clientTurnId": "big"}
    queued = socket.send(json.dumps(frame, ensure_ascii=False))
    assert queued["type"] == "turn.queued", queued
    stack.drain_turns()
    events = socket.of_run(queued["runId"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # none refused on the way
    started, done = events[0], events[-1]
    assert started["messageChars"] == len(message) and len(started["message"]) == 1000
    assert done["type"] == "turn.completed" and max(len(json.dumps(e, ensure_ascii=False).encode()) for e in events) < 128 * 1024
    (call,) = done["toolCalls"]
    assert call["resultTruncated"] is True and call["ref"] == f"/api/runs/{queued['runId']}" and len(call["result"]) <= 500
    run = stack.call("GET", call["ref"]).data
    assert len(run["toolCalls"][0]["result"]) > 16_000  # the run keeps what the event only previews
