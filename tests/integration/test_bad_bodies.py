"""Request bodies a client can get wrong in transport: every one is a 4xx naming the problem,
never a 500, and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local.apigw import invoke_http


def post(stack: Any, path: str, raw: bytes, content_type: str = "application/json", user: str | None = "alice") -> Any:
    headers = {"content-type": content_type}
    if user:
        headers["authorization"] = f"Bearer dev-{user}"
    status, _, body = invoke_http(stack.functions, "POST", path, body=raw, headers=headers)
    return status, json.loads(body or b"{}")


BAD_BODIES = {
    "not UTF-8": (b'{"name":"caf\xe9","persona":"x"}', "application/json", "invalid_body"),
    "text/plain": (b'{"name":"Ada","persona":"x"}', "text/plain", "unsupported_media_type"),
    "multipart without boundary": (b"--x\r\n\r\n", "multipart/form-data", "unsupported_media_type"),
    "nested 50,000 deep": (b"[" * 50_000 + b"]" * 50_000, "application/json", "invalid_body"),
    "an integer of 5,000 digits": (
        b'{"name":"Ada","persona":"x","extra":' + b"9" * 5000 + b"}",
        "application/json",
        "invalid_body",
    ),
    "a JSON array": (b'[{"name":"Ada","persona":"x"}]', "application/json", "invalid_body"),
    "a JSON string": (b'"Ada"', "application/json", "invalid_body"),
    "empty": (b"", "application/json", "invalid_body"),
    "a form": (b"name=Ada&persona=x", "application/x-www-form-urlencoded", "unsupported_media_type"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_a_bad_body_on_a_write_route_is_a_400_or_415_and_writes_nothing(stack, case):
    raw, content_type, code = BAD_BODIES[case]
    status, body = post(stack, "/api/agents", raw, content_type)
    assert status in (400, 415) and body["error"]["code"] == code, body
    assert stack.call("GET", "/api/agents").data["items"] == []


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_a_bad_body_on_the_unauthenticated_webhook_is_a_4xx(stack, case):
    agent = stack.agent()
    raw, content_type, _ = BAD_BODIES[case]
    status, body = post(stack, f"/api/agents/{agent['id']}/webhook", raw, content_type, user=None)
    assert 400 <= status < 500, body
    assert stack.runs(agent["id"]) == []


def test_a_chat_message_that_is_not_utf8_is_a_400(stack):
    agent = stack.agent()
    status, body = post(stack, f"/api/agents/{agent['id']}/sessions/dashboard/messages", b'{"message":"caf\xe9"}')
    assert status == 400 and body["error"]["code"] == "invalid_body" and body["error"]["field"] == "body", body
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"] == []


# ---- JSON types are kept: the contract's request bodies are strict ----------------------------------
def test_strings_are_not_taken_for_booleans_or_numbers(stack):
    bad = stack.call("POST", "/api/agents", body={"name": "Ada", "persona": "x", "agentMemory": "true"})
    assert bad.status == 400 and bad.error["field"] == "agentMemory", bad.body
    agent = stack.agent()
    path = f"/api/agents/{agent['id']}/memories"
    for field, value in (("pinned", "yes"), ("importance", "50"), ("importance", 50.0)):
        r = stack.call("POST", path, body={"key": "k", "value": "a value", field: value})
        assert r.status == 400 and r.error["field"] == field, (field, value, r.body)
    assert stack.call("GET", path).data["items"] == []
    ok = stack.call("POST", path, body={"key": "k", "value": "a value", "pinned": True, "importance": 50})
    assert ok.status in (200, 201), ok.body
    fact = stack.call("POST", "/api/me/facts", body={"fact": "I live in Oslo"})
    assert fact.status == 201, fact.body
    r = stack.call("PATCH", f"/api/me/facts/{fact.data['id']}", body={"archived": "no"})
    assert r.status == 400 and r.error["field"] == "archived", r.body


# ---- paging tokens -------------------------------------------------------------------------------------
def test_a_token_forged_from_the_callers_own_partition_is_a_400(stack):
    import base64

    from engram.aws import keys
    from engram.kernel.ids import tenant_key

    stack.agent()
    forged = base64.urlsafe_b64encode(json.dumps({"PK": keys.tenant_pk(tenant_key("alice"))}).encode()).decode()
    r = stack.call("GET", "/api/agents", query={"nextToken": forged.rstrip("=")})
    assert r.status == 400 and r.error["code"] == "invalid_token" and r.error["field"] == "nextToken", r.body


# ---- run inputs: only what can be stored and read back ---------------------------------------------
@pytest.mark.parametrize(
    "inputs",
    [
        {"a": {"": {}}},
        {"a": {"x" * 101: 1}},
        {"a": [[[[[[[[[[1]]]]]]]]]]},
        {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}},
    ],
)
def test_run_inputs_that_could_not_be_stored_and_read_back_are_a_400(stack, inputs):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go", "inputs": inputs})
    assert r.status == 400 and r.error["field"] == "inputs", r.body
    assert stack.runs(agent["id"]) == []


def test_a_run_row_with_an_unreadable_attribute_does_not_break_its_readers(moto_stack):
    """Rows an older version or another writer left must not turn every list into a 500."""
    stack = moto_stack
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go", "inputs": {"a": {"b": 1}}})
    assert r.status == 202, r.body
    stack.drain_runs()
    run_id = r.data["runId"]
    from engram.aws import keys
    from engram.kernel.ids import tenant_key

    table = stack.deps.table
    raw = table.client.get_item(
        TableName=table.name, Key={"PK": {"S": keys.tenant_pk(tenant_key("alice"))}, "SK": {"S": keys.run_sk(run_id)}}
    )
    item = raw["Item"]
    item["toolCalls"] = {"L": [{"M": {"input": {"M": {"": {"M": {}}}}}}]}  # moto returns the empty map untyped
    table.client.put_item(TableName=table.name, Item=item)
    for path in (
        f"/api/agents/{agent['id']}/runs",
        f"/api/runs/{run_id}",
        f"/api/agents/{agent['id']}/decisions",
        f"/api/runs/{run_id}/memory",
        "/api/me/export",
    ):
        assert stack.call("GET", path).status == 200, path
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "succeeded"


# ---- schedule expressions: one answer in AWS and locally ---------------------------------------------
@pytest.mark.parametrize("expression", ["rate(0 minutes)", "cron(a b c d e f)", "cron(99 99 * * ? *)", "cron(0 9 * * * *)"])
@pytest.mark.parametrize("backend", ["stack", "moto_stack"])
def test_a_schedule_scheduler_would_refuse_is_a_400_everywhere(request, backend, expression):
    stack = request.getfixturevalue(backend)
    r = stack.call("POST", "/api/agents", body={"name": "Ada", "persona": "x", "defaultPrompt": "go", "schedule": expression})
    assert r.status == 400 and r.error["code"] == "invalid_schedule" and r.error["field"] == "schedule", r.body
    assert stack.call("GET", "/api/agents").data["items"] == []
    agent = stack.agent(defaultPrompt="go")
    r = stack.call("PATCH", f"/api/agents/{agent['id']}", body={"schedule": expression})
    assert r.status == 400 and r.error["code"] == "invalid_schedule", r.body
    assert stack.call("GET", f"/api/agents/{agent['id']}").data["schedule"] is None
