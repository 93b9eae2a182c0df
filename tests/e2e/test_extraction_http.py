"""Automatic extraction over the local stack's HTTP front, with the queue workers held back so the
order of events can be asserted on state: the reply is complete while its extraction job is still
waiting on the queue; only the queue consumer, later, writes the auto rows and their usage."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from local.stack import start_stack


def http(url: str, method: str, path: str, *, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    request.add_header("authorization", "Bearer dev-alice")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.fixture(scope="module")
def held():
    handle = start_stack(port=0, model_provider="offline", workers=False, retry_delay=0)
    try:
        yield handle
    finally:
        handle.stop()


def test_the_reply_does_not_wait_for_the_extraction(held):
    url = held.url.rstrip("/")
    _, ws = http(url, "POST", "/api/workspaces", body={"name": "Billing"})
    ws_id = ws["data"]["id"]
    _, created = http(url, "POST", "/api/agents", body={"name": "Ada", "workspaceId": ws_id, "agentMemory": True})
    agent_id = created["data"]["id"]
    status, said = http(
        url,
        "POST",
        f"/api/agents/{agent_id}/sessions/dashboard/messages",
        body={"message": "Quick context: our deploy command is make deploy, and we use Postgres 16 with FastAPI."},
    )
    assert status == 200 and said["data"]["reply"]

    # the reply is out, and the job has not run: it is still on the queue, nothing is stored or billed
    assert held.workers.queue_depth("ExtractQueue") == 1
    _, mems = http(url, "GET", f"/api/workspaces/{ws_id}/memories")
    assert mems["data"]["items"] == []
    usage_path = f"/api/usage?agentId={agent_id}&sessionId=memory-extract:dashboard"
    assert http(url, "GET", usage_path)[1]["data"]["items"] == []
    # the chat's own usage was committed with the turn
    assert [u["runId"] for u in http(url, "GET", f"/api/usage?agentId={agent_id}&sessionId=dashboard")[1]["data"]["items"]] == [
        said["data"]["runId"]
    ]

    assert held.drain("ExtractQueue") == 1  # now the consumer runs
    _, mems = http(url, "GET", f"/api/workspaces/{ws_id}/memories")
    assert sorted(m["key"] for m in mems["data"]["items"]) == ["auto:deploy-command", "auto:uses-postgres-16-with-fastapi"]
    assert all(m["source"] == "auto" and m["origin"]["runId"] == said["data"]["runId"] for m in mems["data"]["items"])
    (row,) = http(url, "GET", usage_path)[1]["data"]["items"]
    assert row["runId"] == said["data"]["runId"] and row["sessionKey"] == "memory-extract:dashboard"
    # the run itself is untouched by its extraction
    _, run = http(url, "GET", f"/api/runs/{said['data']['runId']}")
    assert run["data"]["status"] == "succeeded" and run["data"]["usage"] == said["data"]["usage"]
