"""Issue 39, item 5: no coercion on any body. For every request body in docs/openapi.yaml, each
boolean, integer, string and date-time property is sent with a value of another JSON type (0 for a
boolean, "5" for an integer, 1893456000 for a date-time, ...); the answer is a 400 naming that
field. Read from the spec, so a new route or property is covered without a new line here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

SPEC = yaml.safe_load((Path(__file__).parents[2] / "docs" / "openapi.yaml").read_text())
SCHEMAS = SPEC["components"]["schemas"]


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _wrong_values(schema: dict[str, Any]) -> list[Any]:
    """JSON values of another type than the property's (none of them valid for it)."""
    kinds = schema.get("type")
    kinds = set(kinds if isinstance(kinds, list) else [kinds] if kinds else [])
    enum = schema.get("enum")
    if enum is not None:
        wrong = [0, 1, "true", "false", 2.5] if any(isinstance(e, bool) for e in enum) else [0, True]
        return [w for w in wrong if not any(type(w) is type(e) and w == e for e in enum)]
    if schema.get("format") == "date-time":
        return [1893456000, 1893456000.5, True]
    if "boolean" in kinds:
        return [0, 1, "true", "false", "yes"]
    if "integer" in kinds:
        return ["5", True, 1.5]
    if "string" in kinds:
        return [5, True, 1.5]
    return []


# RFC 7591 registration answers 404 on a stack without its own user pool (as this one): its
# wrong-type cases run with a pool in tests/integration/test_oauth_registration.py.
NEEDS_A_USER_POOL = {"/api/oauth/register"}

CASES = [
    pytest.param(method.upper(), path, name, wrong, id=f"{method.upper()} {path} {name}={wrong!r}")
    for path, operations in SPEC["paths"].items()
    if path not in NEEDS_A_USER_POOL
    for method, operation in operations.items()
    if isinstance(operation, dict) and "application/json" in operation.get("requestBody", {}).get("content", {})
    for name, prop in _resolve(operation["requestBody"]["content"]["application/json"]["schema"]).get("properties", {}).items()
    for wrong in _wrong_values(_resolve(prop))
]


def _ids(stack: Any, path: str) -> dict[str, str]:
    """Real ids for the path's placeholders (only those it has)."""
    ids = {"sessionId": "dashboard", "connectionId": "con_00000000000000000000000000", "name": "my-card"}
    if "{agentId}" in path or "{runId}" in path:
        ids["agentId"] = stack.agent()["id"]
    if "{workspaceId}" in path:
        ids["workspaceId"] = stack.call("POST", "/api/workspaces", body={"name": "ws"}).data["id"]
    if "{memoryId}" in path:
        owner = f"agents/{ids['agentId']}" if "agentId" in ids else f"workspaces/{ids['workspaceId']}"
        ids["memoryId"] = stack.call("POST", f"/api/{owner}/memories", body={"key": "k", "value": "tea"}).data["key"]
    if "{factId}" in path:
        ids["factId"] = stack.call("POST", "/api/me/facts", body={"fact": "The user likes tea."}).data["id"]
    if "{runId}" in path:
        ids["runId"] = stack.call("POST", f"/api/agents/{ids['agentId']}/runs", body={"prompt": "go"}).data["runId"]
    return ids


def test_every_body_property_of_the_spec_is_covered():
    assert len(CASES) >= 150 and {c.values[2] for c in CASES} >= {"reExaminable", "expiresAt", "pinned", "importance"}


@pytest.mark.parametrize("method, path, name, wrong", CASES)
def test_a_wrong_json_type_is_a_400_naming_the_field(stack, method, path, name, wrong):
    if path.endswith("/webhook"):  # signed with the agent's webhook secret, not a bearer token
        agent = stack.agent()
        r = stack.webhook(agent["id"], agent["webhookSecret"], {name: wrong})
    else:
        r = stack.call(method, path.format(**_ids(stack, path)), body={name: wrong})
    assert r.status == 400, (r.status, r.body)
    fields = {d.get("field") for d in r.error.get("details", [])} | {r.error.get("field")}
    assert name in fields or any(f and f.split(".")[0] == name for f in fields), r.body


@pytest.mark.parametrize(
    "url",
    [
        "https://tools.example.com/mcp?token=tok_8f2b1c",
        "https://tools.example.com/mcp?api_key=abc123",
        "https://tools.example.com/mcp?v=2&X-Amz-Signature=0f1e2d",
        "https://tools.example.com/mcp?client=sk-ant-api03-nqybmozUKaPZqRwTl90bsR42",
    ],
)
def test_a_connection_url_with_a_credential_in_its_query_is_refused_pointing_to_the_auth_header(stack, url):
    """A token in the query string was accepted, then shown by GET and the export."""
    r = stack.call("POST", "/api/connections", body={"name": "market", "url": url})
    assert r.status == 400 and r.error["field"] == "url", r.body
    assert "authHeader" in r.error["message"] and "stored encrypted" in r.error["message"]
    assert stack.call("GET", "/api/connections").data["items"] == []
    ok = stack.call("POST", "/api/connections", body={"name": "market", "url": "https://tools.example.com/mcp?v=2"})
    assert ok.status == 201, ok.body  # a query without a credential is fine
    patched = stack.call("PATCH", f"/api/connections/{ok.data['id']}", body={"url": url})
    assert patched.status == 400 and patched.error["field"] == "url", patched.body
    assert stack.call("GET", f"/api/connections/{ok.data['id']}").data["url"] == "https://tools.example.com/mcp?v=2"
