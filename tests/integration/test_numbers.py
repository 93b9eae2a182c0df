"""Numbers at DynamoDB's limits (issue 22, item 5): DynamoDB stores zero, or a magnitude from 1E-130
to 9.99...E+125, with at most 38 significant digits. Every route that stores a number answers a
number outside that with a 400 naming the field, and stores one inside it exactly: a 4xx or
stored, never a 500, and never a run accepted that can neither run nor fail."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

# The numbers a JSON body can carry, pressed against DynamoDB's limits.
_EDGES = [
    0,
    0.0,
    -0.0,
    1e-130,
    -1e-130,
    9.9e-131,
    1e-131,
    1e-200,
    1e-320,  # a subnormal float
    5e-324,
    9.999999999999999e125,
    1e126,
    -1e126,
    1.7976931348623157e308,
    10**37,
    10**38 - 1,
    10**38 + 1,
    10**125,
    10**126,
    -(10**126),
    2**63,
    -(2**63) - 1,
    123456789012345678901234567890123456789,  # 39 significant digits
    1.5,
]
NUMBERS = st.one_of(
    st.sampled_from(_EDGES),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(10**130), max_value=10**130),
    st.builds(lambda m, e: float(f"{m}e{e}"), st.integers(1, 9), st.integers(-340, 308)),
)


def storable(value: float | int) -> bool:
    if value == 0:
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return False  # json.dumps sends Infinity, which Python's parser reads
    sign, digits, exponent = Decimal(repr(value) if isinstance(value, float) else value).as_tuple()
    kept = list(digits)
    while kept and kept[-1] == 0:
        kept.pop()
        exponent = int(exponent) + 1
    return len(kept) <= 38 and -130 <= int(exponent) + len(kept) - 1 <= 125


# ---- the OpenAPI's number fields -------------------------------------------------------------------
def _number_fields() -> set[tuple[str, str, str]]:
    """(method, path, field) of every number a request body may carry, `*` for a free-form name
    (an object whose values may be any JSON, numbers included)."""
    spec = yaml.safe_load((ROOT / "docs/openapi.yaml").read_text())
    schemas = spec["components"]["schemas"]

    def resolve(schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def walk(schema: Any, path: list[str], out: set[str]) -> None:
        schema = resolve(schema)
        if not isinstance(schema, dict):
            return
        types = schema.get("type")
        types = types if isinstance(types, list) else [types]
        untyped = not {"type", "allOf", "anyOf", "oneOf", "enum", "const", "properties"} & set(schema)
        if "number" in types or "integer" in types or untyped:  # untyped: any JSON value, numbers too
            out.add(".".join(path))
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in schema.get(key, []):
                walk(sub, path, out)
        for name, sub in (schema.get("properties") or {}).items():
            walk(sub, [*path, name], out)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, [*path, "*"], out)
        elif "object" in types and extra is not False and not schema.get("properties"):
            out.add(".".join([*path, "*"]))  # free-form values

    found: set[tuple[str, str, str]] = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body:
                continue
            fields: set[str] = set()
            walk(body["content"]["application/json"]["schema"], [], fields)
            found |= {(method.upper(), path, f) for f in fields}
    return found


def _set(body: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """`body` with `field` (dotted, `*` -> `x`) set to `value`."""
    out = dict(body)
    node = out
    parts = [p if p != "*" else "x" for p in field.split(".")]
    for part in parts[:-1]:
        node[part] = dict(node.get(part) or {})
        node = node[part]
    node[parts[-1]] = value
    return out


# How each route that stores a number is called, and how the stored value is read back: (the
# route's concrete path and base body for a stack) and (the stored value, or None).
Route = tuple[
    Callable[[Any], tuple[str, Any]], Callable[[Any, Any, str], Any]
]  # the base body, or a callable making one per example


def _memory_owner(stack: Any, scope: str) -> str:
    if scope == "agents":
        return f"/api/agents/{stack.agent()['id']}"
    return f"/api/workspaces/{stack.call('POST', '/api/workspaces', body={'name': 'W'}).data['id']}"


def _memory_route(scope: str, patch: bool) -> Route:
    def prepare(stack: Any) -> tuple[str, dict[str, Any]]:
        owner = _memory_owner(stack, scope)
        if not patch:
            return f"{owner}/memories", {"key": "k", "value": "v"}
        made = stack.call("POST", f"{owner}/memories", body={"key": "k", "value": "v"}).data
        return f"{owner}/memories/{made['id']}", {}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        return reply.data["importance"]

    return prepare, stored


def _card_type_route() -> Route:
    def prepare(stack: Any) -> tuple[str, dict[str, Any]]:
        return "/api/card-types/x", {"fields": {"x": {"type": "number"}}}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        field = stack.call("GET", path).data["fields"]["x"]
        return field.get("min", field.get("max", field.get("maxLength")))

    return prepare, stored


def _run_route() -> Route:
    def prepare(stack: Any) -> tuple[str, dict[str, Any]]:
        return f"/api/agents/{stack.agent()['id']}/runs", {"prompt": "go", "inputs": {}}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        stack.drain_runs()
        run = stack.call("GET", f"/api/runs/{reply.data['runId']}").data
        assert run["status"] == "succeeded", run  # it ran (it neither stayed running nor failed)
        memory = stack.call("GET", f"/api/runs/{run['id']}/memory").data["items"]
        return next(e["value"] for e in memory if e["key"] == "input:x")

    return prepare, stored


def _connection_route(patch: bool) -> Route:
    made = iter(range(1_000_000))

    def prepare(stack: Any) -> tuple[str, Any]:
        stack.deps.settings = stack.deps.settings.model_copy(update={"max_connections": 1_000})
        if not patch:  # a fresh name for each example: names are unique per user
            return "/api/connections", lambda: {"name": f"c{next(made)}", "url": "http://127.0.0.1:9/mcp"}
        conn = stack.call("POST", "/api/connections", body={"name": "c", "url": "http://127.0.0.1:9/mcp"}).data
        return f"/api/connections/{conn['id']}", {}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        return reply.data["timeoutSeconds"]

    return prepare, stored


def _limits_route(route: str) -> Route:
    """An agent's spending limits (created, or patched) and the person's (PATCH /api/me)."""

    def prepare(stack: Any) -> tuple[str, dict[str, Any]]:
        if route == "POST /api/agents":
            return "/api/agents", {"name": "A"}
        return ("/api/me" if route == "PATCH /api/me" else f"/api/agents/{stack.agent()['id']}"), {}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        limits = stack.call("GET", path if route != "POST /api/agents" else f"/api/agents/{reply.data['id']}").data["limits"]
        (value,) = limits.values()
        return value

    return prepare, stored


def _agent_route(patch: bool) -> Route:
    """An agent's approvalTimeoutS (TL10)."""

    def prepare(stack: Any) -> tuple[str, Any]:
        stack.deps.settings = stack.deps.settings.model_copy(update={"max_agents": 1_000})
        if not patch:
            return "/api/agents", {"name": "A"}
        return f"/api/agents/{stack.agent()['id']}", {}

    def stored(stack: Any, reply: Any, path: str) -> Any:
        return reply.data["approvalTimeoutS"]

    return prepare, stored


def _agent_numbers_route(patch: bool) -> Route:
    """An agent's number fields: its limits (TL10, read back from its limits) and its
    approvalTimeoutS (TL10, read back from the reply): both branches' routes, one per route key."""
    prepare, approval_stored = _agent_route(patch)
    limits_stored = _limits_route("PATCH /api/agents/{agentId}" if patch else "POST /api/agents")[1]

    def stored(stack: Any, reply: Any, path: str) -> Any:
        return limits_stored(stack, reply, path) if reply.data.get("limits") else approval_stored(stack, reply, path)

    return prepare, stored


ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/api/agents"): _agent_numbers_route(patch=False),
    ("PATCH", "/api/agents/{agentId}"): _agent_numbers_route(patch=True),
    ("PATCH", "/api/me"): _limits_route("PATCH /api/me"),
    ("POST", "/api/connections"): _connection_route(patch=False),
    ("PATCH", "/api/connections/{connectionId}"): _connection_route(patch=True),
    ("POST", "/api/agents/{agentId}/memories"): _memory_route("agents", patch=False),
    ("PATCH", "/api/agents/{agentId}/memories/{memoryId}"): _memory_route("agents", patch=True),
    ("POST", "/api/workspaces/{workspaceId}/memories"): _memory_route("workspaces", patch=False),
    ("PATCH", "/api/workspaces/{workspaceId}/memories/{memoryId}"): _memory_route("workspaces", patch=True),
    ("PUT", "/api/card-types/{name}"): _card_type_route(),
    ("POST", "/api/agents/{agentId}/runs"): _run_route(),
}
FIELDS = sorted(_number_fields())


def test_every_number_field_of_the_openapi_is_covered():
    assert {(m, p) for m, p, _ in FIELDS} == set(ROUTES), "a route that stores numbers needs a row in ROUTES"
    assert ("POST", "/api/agents/{agentId}/runs", "inputs.*") in FIELDS
    assert ("PUT", "/api/card-types/{name}", "fields.*.min") in FIELDS


@pytest.mark.parametrize("method,route,field", FIELDS, ids=[f"{m} {p} {f}" for m, p, f in FIELDS])
def test_numbers_at_dynamodbs_limits_are_refused_with_a_400_or_stored(stack, method, route, field):
    prepare, stored = ROUTES[(method, route)]
    path, base = prepare(stack)

    @settings(max_examples=12 if route.endswith("/runs") else 40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(NUMBERS)
    def check(value: float | int) -> None:
        reply = stack.call(method, path, body=_set(base() if callable(base) else base, field, value))
        assert reply.status < 500, (value, reply.body)
        if reply.status < 300:
            assert storable(value), (value, reply.body)
            got = stored(stack, reply, path)
            assert got == value or float(got) == float(value), (value, got)  # a float field keeps a float
        elif reply.error.get("code") == "number_out_of_range":  # never for a number DynamoDB stores
            assert not storable(value), (value, reply.body)
            assert reply.status == 400 and reply.error["field"] == field.replace("*", "x"), reply.body

    check()


def test_a_run_with_an_unstorable_input_is_refused_before_it_is_queued(stack):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go", "inputs": {"a": 1e-200}})
    assert r.status == 400 and r.error["code"] == "number_out_of_range" and r.error["field"] == "inputs.a", r.body
    assert stack.runs(agent["id"]) == []
    deep = {"prompt": "go", "inputs": {"a": {"b": [1, 2, 10**130]}}}
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body=deep)
    assert r.status == 400 and r.error["field"] == "inputs.a.b.2", r.body
    nan = stack.call("POST", f"/api/agents/{agent['id']}/runs", raw='{"prompt": "go", "inputs": {"a": NaN}}')
    assert nan.status == 400 and nan.error["field"] == "inputs.a", nan.body


def test_a_card_type_with_an_unstorable_bound_is_a_400_naming_the_field(stack):
    r = stack.call("PUT", "/api/card-types/x", body={"fields": {"score": {"type": "number", "min": 1e-320}}})
    assert r.status == 400 and r.error["code"] == "number_out_of_range" and r.error["field"] == "fields.score.min", r.body
    ok = stack.call("PUT", "/api/card-types/x", body={"fields": {"score": {"type": "number", "min": 1e-130, "max": 9e125}}})
    assert ok.status == 201, ok.body
    assert stack.call("GET", "/api/card-types/x").data["fields"]["score"]["min"] == 1e-130
