"""A flood of frames on the local WebSocket API (ST7): 1,000 `turn` frames sent at once are all
answered (queued within the user's cap, `too_many_turns` beyond it), and the socket stays open
(the keepalive's pongs are read however long the backlog)."""

from __future__ import annotations

import json
import threading

from tests.e2e.test_local_stack_http import new_agent
from tests.e2e.test_stream_local import open_socket

FLOOD = 1_000


def test_a_thousand_frames_are_all_answered_and_the_socket_survives(live):
    url = live.url.rstrip("/")
    agent = new_agent(url)
    answers: list[dict] = []
    with open_socket(url) as ws:
        done = threading.Event()

        def read() -> None:
            while len([a for a in answers if a.get("type") in ("turn.queued", "error")]) < FLOOD:
                answers.append(json.loads(ws.recv(timeout=120)))
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for i in range(FLOOD):
            frame = {
                "action": "turn",
                "agentId": agent["id"],
                "sessionId": "dashboard",
                "message": f"n{i}",
                "clientTurnId": f"f{i}",
            }
            ws.send(json.dumps(frame))
        assert done.wait(300), f"{len(answers)} frames answered"
        reader.join()
        replies = [a for a in answers if a.get("type") in ("turn.queued", "error")]
        assert {a["clientTurnId"] for a in replies} == {f"f{i}" for i in range(FLOOD)}
        queued = [a for a in replies if a["type"] == "turn.queued"]
        refused = {a["error"]["code"] for a in replies if a["type"] == "error"}
        # the cap (MAX_ACTIVE_TURNS, 20) refuses some; turns that end meanwhile make room for others
        assert 20 <= len(queued) < FLOOD and refused == {"too_many_turns"}
        ws.send(json.dumps({"action": "subscribe", "agentId": agent["id"], "sessionId": "dashboard"}))
        while (frame := json.loads(ws.recv(timeout=60)))["type"] != "subscribed":
            pass  # the slow turn's events arrive meanwhile
