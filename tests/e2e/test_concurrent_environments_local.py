"""The local stack runs a function's invocations as Lambda does (ST7): each in an execution
environment of its own, so another user's sync turn is answered while a long socket turn holds
one of the chat function's environments, and HTTP events served side by side each read their own
request (the core's routers read the resolver of the invocation they serve)."""

from __future__ import annotations

import json
import threading

from tests.e2e.test_local_stack_http import http, new_agent, wait_for_run
from tests.e2e.test_stream_local import open_socket
from tests.e2e.test_stream_resume_local import servers, tool_agent

__all__ = ["servers"]  # the MCP servers fixture, shared


def test_a_sync_turn_is_answered_during_another_users_long_socket_turn(live, servers):
    url = live.url.rstrip("/")
    bobs = tool_agent(url, servers, "jobs", user="bob")
    with open_socket(url, user="bob") as ws:
        frame = {
            "action": "turn",
            "agentId": bobs,
            "sessionId": "dashboard",
            "message": "use slow with 30",
            "clientTurnId": "long",
        }
        ws.send(json.dumps(frame))
        run_id = None
        while True:
            event = json.loads(ws.recv(timeout=60))
            run_id = run_id or event.get("runId")
            if event["type"] == "tool.started":
                break
        alices = new_agent(url)
        status, body = http(url, "POST", f"/api/agents/{alices['id']}/sessions/dashboard/messages", body={"message": "quick one"})
        assert status == 200, body  # before: it waited behind the long turn and answered 504
        status, long_run = http(url, "GET", f"/api/runs/{run_id}", user="bob")
        assert long_run["data"]["status"] in ("queued", "running")  # the long turn is still going
    assert wait_for_run(url, run_id, user="bob", attempts=600)["status"] == "succeeded"


def test_concurrent_http_events_each_read_their_own_request(live):
    url = live.url.rstrip("/")
    agent = new_agent(url)
    answers: dict[int, tuple[int, dict]] = {}

    def say(i: int) -> None:
        answers[i] = http(url, "POST", f"/api/agents/{agent['id']}/sessions", body={"id": f"s{i}", "title": f"title {i}"})

    threads = [threading.Thread(target=say, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(answers) == list(range(12))
    for i, (status, body) in answers.items():
        assert status == 201 and body["data"]["id"] == f"s{i}" and body["data"]["title"] == f"title {i}"
    assert live.functions["ApiFunction"].environments() >= 1
