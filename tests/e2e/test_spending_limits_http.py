"""Spending limits (TL10) and usage breakdowns (OB4) over HTTP on the local stack, with the real
anthropic SDK calling a scripted Messages API on loopback (ANTHROPIC_BASE_URL), so every call is
priced: a limit reached mid-turn, toolCallsPerTurn, a heartbeat skipped over its limit, the
breakdown equal to the sum of the rows (extraction included), another user's usage invisible."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import pytest

from local.stack import start_stack
from tests.integration.test_turns_anthropic import _message

MODEL = "claude-sonnet-4-6"
CALL_USD = 0.006975  # 1,000 input, 100 output, 2,000 cache read, 500 cache write tokens of Sonnet


class MessagesApi(BaseHTTPRequestHandler):
    """POST /v1/messages: a forced tool (extraction, summary) gets that tool with empty input;
    a message asking for "N tools" gets N get_current_time calls, once; anything else a text."""

    calls: list[dict[str, Any]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).calls.append(body)
        forced = (body.get("tool_choice") or {}).get("name")
        last = body["messages"][-1]["content"]
        text = " ".join(b.get("text", "") for b in last if isinstance(b, dict)) if isinstance(last, list) else str(last)
        if forced:
            content, stop = [{"type": "tool_use", "id": "toolu_f", "name": forced, "input": {}}], "tool_use"
        elif "tools" in text and not any(b.get("type") == "tool_result" for b in last if isinstance(b, dict)):
            n = int(text.split(" tools")[0].split()[-1])
            content = [{"type": "tool_use", "id": f"toolu_{i}", "name": "get_current_time", "input": {}} for i in range(n)]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        answer = {**_message(content, stop), "model": body["model"]}  # the figures of CALL_USD
        raw = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture(scope="module")
def live() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), MessagesApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_API_KEY", "sk-test")
        env.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        env.setenv("MODEL_MAX_RETRIES", "0")
        handle = start_stack(port=0, model_provider="anthropic", retry_delay=1)
        try:
            yield handle
        finally:
            handle.stop()
            server.shutdown()


class Api:
    def __init__(self, url: str, user: str):
        self.http = httpx2.Client(base_url=url.rstrip("/"), headers={"authorization": f"Bearer dev-{user}"}, timeout=60)

    def __call__(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        return self.http.request(method, path, **kw)

    def ok(self, method: str, path: str, **kw: Any) -> Any:
        r = self(method, path, **kw)
        assert r.status_code < 300, r.text
        return r.json()["data"]


@pytest.fixture
def alice(live: Any) -> Api:
    return Api(live.url, f"alice-{time.monotonic_ns()}")  # a new person per test: fresh totals


def _agent(api: Api, **fields: Any) -> dict[str, Any]:
    return api.ok("POST", "/api/agents", json={"name": "Ada", "persona": "You help.", "model": MODEL, **fields})


def _say(api: Api, agent_id: str, text: str) -> httpx2.Response:
    return api("POST", f"/api/agents/{agent_id}/sessions/dashboard/messages", json={"message": text})


def _wait(predicate: Any, timeout: float = 30) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def _rows(api: Api) -> list[dict[str, Any]]:
    rows, token = [], None
    while True:
        page = api.ok("GET", "/api/usage", params={"limit": 100, **({"nextToken": token} if token else {})})
        rows += page["items"]
        token = page["nextToken"]
        if not token:
            return rows


def _settled(api: Api) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and the breakdown read while no job wrote between them."""
    for _ in range(50):
        rows = _rows(api)
        breakdown = api.ok("GET", "/api/usage")["breakdown"]
        if _rows(api) == rows:
            return rows, breakdown
        time.sleep(0.2)
    raise AssertionError("usage kept changing")


def test_a_limit_reached_mid_turn_over_http(alice):
    agent = _agent(alice, limits={"dailyCostUsd": 0.01})
    before = len(MessagesApi.calls)
    r = _say(alice, agent["id"], "use 1 tools please")
    assert r.status_code == 402, r.text
    error = r.json()["error"]
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert error["code"] == "limit_exceeded" and error["field"] == "limits.dailyCostUsd"
    assert error["limit"] == {
        "name": "dailyCostUsd",
        "scope": "agent",
        "value": 0.01,
        "spentUsd": CALL_USD,
        "resetsAt": f"{tomorrow}T00:00:00Z",
    }
    assert len(MessagesApi.calls) == before + 1  # the tool ran, the second model call was not made
    run = alice.ok("GET", f"/api/runs/{error['runId']}")
    assert run["status"] == "failed" and run["usage"]["costUsd"] == CALL_USD and run["toolCalls"][0]["name"] == "get_current_time"
    session = alice.ok("GET", f"/api/agents/{agent['id']}/sessions/dashboard")
    assert session["messages"] == []
    usage = alice.ok("GET", "/api/usage", params={"agentId": agent["id"]})
    assert [row["runId"] for row in usage["items"]] == [run["id"]]
    assert usage["breakdown"]["totals"]["costUsd"] == CALL_USD and usage["breakdown"]["totals"]["toolCalls"] == 1
    assert usage["breakdown"]["spending"] == {
        "limits": {"dailyCostUsd": 0.01},
        "todayUsd": CALL_USD,
        "thisMonthUsd": CALL_USD,
        "dayResetsAt": f"{tomorrow}T00:00:00Z",
        "monthResetsAt": usage["breakdown"]["spending"]["monthResetsAt"],
    }


def test_tool_calls_per_turn_over_http(alice):
    agent = _agent(alice, limits={"toolCallsPerTurn": 2})
    r = _say(alice, agent["id"], "use 3 tools please")
    assert r.status_code == 402 and r.json()["error"]["limit"] == {"name": "toolCallsPerTurn", "scope": "agent", "value": 2}
    run = alice.ok("GET", f"/api/runs/{r.json()['error']['runId']}")
    assert run["toolCalls"] == [] and run["usage"]["costUsd"] == CALL_USD  # none of the three ran


def test_a_heartbeat_over_its_limit_is_skipped_over_http(live, alice):
    agent = _agent(alice, schedule="rate(1 minute)", defaultPrompt="Check in.", limits={"dailyCostUsd": 0.005})
    assert _say(alice, agent["id"], "hello").status_code == 200  # $0.006975: over the daily limit now
    before = len(MessagesApi.calls)
    live.fire_schedules(datetime.now(UTC) + timedelta(minutes=2))
    runs = _wait(lambda: [r for r in alice.ok("GET", f"/api/agents/{agent['id']}/runs")["items"] if r["kind"] == "heartbeat"])
    heartbeat = _wait(lambda: (r := alice.ok("GET", f"/api/runs/{runs[0]['id']}"))["status"] == "failed" and r)
    assert heartbeat["error"]["code"] == "limit_exceeded" and heartbeat["error"]["skipped"] is True
    assert heartbeat["usage"]["costUsd"] == 0
    chat_calls = [c for c in MessagesApi.calls[before:] if not c.get("tool_choice")]
    assert chat_calls == []  # no model call for the heartbeat (an extraction of the chat turn may run)


def test_the_breakdown_is_the_sum_of_the_rows_and_private(live, alice):
    first, second = _agent(alice, agentMemory=True), _agent(alice, name="Bea")
    assert _say(alice, first["id"], "use 1 tools please").status_code == 200
    assert _say(alice, second["id"], "hello").status_code == 200
    # the extraction jobs of the turns (their forced-tool answers are malformed: stored nothing, billed)
    _wait(lambda: any("-x" in r["id"] for r in _rows(alice)))
    rows, breakdown = _settled(alice)
    extracted = round(sum(r["costUsd"] for r in rows if "-x" in r["id"]), 8)  # the extraction model's price
    total = round(sum(r["costUsd"] for r in rows), 8)
    assert breakdown["totals"]["costUsd"] == total == round(3 * CALL_USD + extracted, 8)
    assert breakdown["totals"]["inputTokens"] == sum(r["inputTokens"] for r in rows)
    assert {k["kind"]: k["costUsd"] for k in breakdown["kinds"]} == {
        "chat": round(3 * CALL_USD, 8),  # the tool loop's two calls and the second agent's one
        "extraction": extracted,
    }
    assert {m["model"]: m["costUsd"] for m in breakdown["models"]} == {
        model: round(sum(r["costUsd"] for r in rows if r["model"] == model), 8) for model in {r["model"] for r in rows}
    }
    by_agent = {a["agentId"]: a["costUsd"] for a in breakdown["agents"]}
    assert by_agent == {
        agent: round(sum(r["costUsd"] for r in rows if r["agentId"] == agent), 8) for agent in (first["id"], second["id"])
    }
    today = datetime.now(UTC).date().isoformat()
    assert [d["costUsd"] for d in breakdown["days"] if d["date"] == today] == [total]
    bob = Api(live.url, f"bob-{time.monotonic_ns()}")
    assert bob.ok("GET", "/api/usage")["breakdown"]["totals"]["costUsd"] == 0
    theirs = bob.ok("GET", "/api/usage", params={"agentId": first["id"]})
    assert theirs["items"] == [] and theirs["breakdown"]["totals"]["costUsd"] == 0
