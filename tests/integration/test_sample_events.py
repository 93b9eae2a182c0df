"""Every sample event in events/ drives its handler to a real answer (what `sam local invoke` sees)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from engram.kernel.ids import tenant_key

EVENTS = Path(__file__).resolve().parents[2] / "events"
# The console's page and files answer HTML, scripts and styles, not the JSON envelope.
CONSOLE_EVENTS = ("api-get-root.json", "api-get-console.json")
# OAuth's own answers (TL9): the callback's page for the person's browser, the client metadata document.
OAUTH_EVENTS = ("chat-get-callback.json", "chat-get-client-metadata.json.json")
HTTP_EVENTS = sorted(
    p.name for p in EVENTS.glob("*.json") if p.name.startswith(("api-", "chat-")) and p.name not in CONSOLE_EVENTS + OAUTH_EVENTS
)


def _function_for(name: str) -> str:
    return "ChatFunction" if name.startswith("chat-") else "ApiFunction"


@pytest.mark.parametrize("name", HTTP_EVENTS)
def test_http_sample_event_gets_an_enveloped_answer(stack, name):
    event = json.loads((EVENTS / name).read_text())
    result = stack.functions[_function_for(name)].invoke(event)
    body = json.loads(result["body"])
    assert result["statusCode"] < 500, body
    if name == "api-post-mcp.json":  # no token in it: the MCP server's 401 says how to sign in (MX4)
        assert result["statusCode"] == 401 and body["error"]["data"]["code"] == "unauthorized"
        challenge = result["headers"]["WWW-Authenticate"]
        assert challenge.startswith("Bearer ") and 'resource_metadata="https://' in challenge
        assert "/.well-known/oauth-protected-resource/mcp" in challenge
        return
    if name.startswith("api-get-well-known-oauth-protected-resource"):  # RFC 9728: plain JSON
        assert result["statusCode"] == 200 and body["resource"].endswith("/mcp")
        assert body["bearer_methods_supported"] == ["header"]
        return
    if name in ("api-get-well-known-oauth-authorization-server.json", "api-post-register.json"):
        # RFC 8414 / RFC 7591 answers (plain JSON): the local stack has no pool, so it registers nothing
        assert result["statusCode"] == 404 and "loopback authorization server" in body["error_description"]
        return
    if name in ("api-get-mcp.json", "api-delete-mcp.json"):  # POST only: a JSON-RPC error
        assert result["statusCode"] == 405 and result["headers"]["Allow"] == "POST"
        assert body["error"]["data"]["code"] == "method_not_allowed"
        return
    assert set(body) >= {"success"} and (body["success"] is True or body["error"]["code"])


def test_console_sample_events_get_the_page_and_a_404_for_an_unknown_file(stack):
    page = stack.functions["ApiFunction"].invoke(json.loads((EVENTS / "api-get-root.json").read_text()))
    assert page["statusCode"] == 200 and page["isBase64Encoded"] is True
    assert page["headers"]["Content-Type"] == "text/html; charset=utf-8"
    assert b"/console/app.js" in base64.b64decode(page["body"])
    unknown = stack.functions["ApiFunction"].invoke(json.loads((EVENTS / "api-get-console.json").read_text()))
    assert unknown["statusCode"] == 404 and json.loads(unknown["body"])["error"]["code"] == "not_found"


def test_oauth_sample_events_get_the_refusal_page_and_the_client_metadata_document(stack):
    chat = stack.functions["ChatFunction"]
    page = chat.invoke(json.loads((EVENTS / "chat-get-callback.json").read_text()))  # no state in it
    assert page["statusCode"] == 400 and page["headers"]["Content-Type"] == "text/html; charset=utf-8"
    assert "no state" in page["body"]
    document = chat.invoke(json.loads((EVENTS / "chat-get-client-metadata.json.json").read_text()))
    body = json.loads(document["body"])
    assert document["statusCode"] == 200 and body["client_id"].endswith("/api/connections/oauth/client-metadata.json")
    assert body["redirect_uris"] == [body["client_id"].replace("client-metadata.json", "callback")]


def test_sample_agent_event_reaches_the_agent_of_its_user(stack):
    # events use agent id "a1" and user "alice": create that agent's row the way the API would
    agent = stack.agent()
    event = json.loads((EVENTS / "api-get-agent.json").read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/api/agents/{agent['id']}"
    event["pathParameters"] = {"agentId": agent["id"]}
    result = stack.functions["ApiFunction"].invoke(event)
    assert result["statusCode"] == 200 and json.loads(result["body"])["data"]["id"] == agent["id"]


def test_sqs_turn_sample_event_runs_the_turn(stack):
    agent = stack.agent()
    event = json.loads((EVENTS / "sqs-turn.json").read_text())
    record = event["Records"][0]
    job = json.loads(record["body"])
    job.update(tenant=tenant_key("alice"), agentId=agent["id"])
    record["body"] = json.dumps(job)
    result = stack.functions["ChatFunction"].invoke(event)
    assert result == {"batchItemFailures": []}
    run = stack.call("GET", f"/api/runs/{job['runId']}").data
    assert run["status"] == "succeeded"
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messageCount"] == 2


def test_scheduler_sample_event_runs_a_heartbeat(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt="Check in.")
    event = json.loads((EVENTS / "heartbeat-schedule.json").read_text())
    event.update(tenant=tenant_key("alice"), agentId=agent["id"])
    result = stack.functions["HeartbeatFunction"].invoke(event)
    assert result["status"] == "succeeded"
    run = stack.call("GET", f"/api/runs/{result['runId']}").data
    assert run["kind"] == "heartbeat" and run["prompt"] == "Check in."
    # The sample as shipped names an agent nobody has: nothing runs, nothing fails.
    assert (
        stack.functions["HeartbeatFunction"].invoke(json.loads((EVENTS / "heartbeat-schedule.json").read_text()))["status"]
        == "ignored"
    )


def test_sqs_run_sample_event_runs_the_queued_run(stack):
    agent = stack.agent(defaultPrompt="Check in.")
    queued = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={}).data
    event = json.loads((EVENTS / "sqs-run.json").read_text())
    record = event["Records"][0]
    record["body"] = json.dumps(
        {**json.loads(record["body"]), "tenant": tenant_key("alice"), "runId": queued["runId"], "agentId": agent["id"]}
    )
    assert stack.functions["HeartbeatFunction"].invoke(event) == {"batchItemFailures": []}
    assert stack.call("GET", f"/api/runs/{queued['runId']}").data["status"] == "succeeded"


def test_sqs_failed_firing_sample_event_records_the_firing_as_a_failed_run(stack):
    agent = stack.agent(schedule="rate(1 hour)", defaultPrompt="Check in.")
    event = json.loads((EVENTS / "sqs-failed-firing.json").read_text())
    # The sample as shipped names an agent nobody has: dropped, not retried.
    assert stack.functions["HeartbeatFunction"].invoke(json.loads(json.dumps(event))) == {"batchItemFailures": []}
    record = event["Records"][0]
    failed = json.loads(record["body"])
    failed["requestPayload"].update(tenant=tenant_key("alice"), agentId=agent["id"])
    record["body"] = json.dumps(failed)
    assert stack.functions["HeartbeatFunction"].invoke(event) == {"batchItemFailures": []}
    (run,) = stack.call("GET", f"/api/agents/{agent['id']}/runs").data["items"]
    assert run["status"] == "failed" and run["error"]["code"] == "firing_failed"


def test_the_mcp_sample_event_is_answered_where_an_event_loop_already_runs(stack):
    # Never so in Lambda; a harness (or a test) calling the handler from async code may be.
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    event = json.loads((EVENTS / "api-post-mcp.json").read_text())
    key = stack.call("POST", "/api/me/api-keys", body={"name": "sample"}).data["key"]
    event["headers"]["authorization"] = f"Bearer {key}"  # /mcp checks its caller itself

    async def call() -> dict:
        return stack.functions["ApiFunction"].invoke(event)  # type: ignore[no-any-return]

    # On a thread of its own: an earlier test of the session may leave a loop on the main thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(asyncio.run, call()).result()
    assert result["statusCode"] == 200 and json.loads(result["body"])["result"]["serverInfo"]["name"] == "engram"
