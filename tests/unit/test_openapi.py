"""docs/openapi.yaml is checked against the code, so the two cannot drift.

Routes (the powertools routers and template.yaml's HttpApi events), query parameters, success
statuses, request bodies (fields, required, limits, and the Settings limits the use cases check),
resource fields (the pydantic models), the started-run, run-memory, export and account-deletion
shapes, plus the document's own structure ($refs resolve, path parameters declared).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from aws_lambda_powertools.event_handler.depends import Depends
from pydantic import BaseModel

from engram.account import models as account_models
from engram.account import routes as account_routes
from engram.account import service as account
from engram.agents import models as agent_models
from engram.agents import routes as agent_routes
from engram.api.http import build_app
from engram.apikeys import models as api_key_models
from engram.apikeys import routes as api_key_routes
from engram.approvals import routes as approval_routes
from engram.approvals.models import ApprovalIn
from engram.cards import models as card_models
from engram.cards import routes as card_routes
from engram.connections import models as connection_models
from engram.connections import oauth_routes, probe_routes
from engram.connections import routes as connection_routes
from engram.conversations import chat_routes, webhooks
from engram.conversations import models as conversation_models
from engram.conversations import routes as session_routes
from engram.engine import turn as turns
from engram.engine.plan import TOOL_CALL_DETAILS
from engram.facts import models as fact_models
from engram.facts import routes as fact_routes
from engram.health import routes as health_routes
from engram.kernel.settings import Settings
from engram.kernel.trace import Trace
from engram.mcp_server import routes as mcp_routes
from engram.memory import models as memory_models
from engram.memory import routes as memory_routes
from engram.recall import routes as recall_routes
from engram.run_memory import models as run_memory_models
from engram.runs import models as run_models
from engram.runs import routes as run_routes
from engram.runs import service as services
from engram.streaming import routes as stream_routes
from engram.usage import models as usage_models
from engram.usage import routes as usage_routes
from local.template import load_yaml

ROOT = Path(__file__).resolve().parents[2]
DOC: dict[str, Any] = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text(encoding="utf-8"))
ROUTERS = tuple(
    m.router
    for m in (
        agent_routes,
        session_routes,
        recall_routes,
        chat_routes,
        memory_routes,
        fact_routes,
        account_routes,
        card_routes,
        run_routes,
        approval_routes,
        usage_routes,
        health_routes,
        connection_routes,
        probe_routes,
        oauth_routes,
        api_key_routes,
        mcp_routes,
        stream_routes,
    )
)
# Every public model, by the name this test has always used for it.
models = SimpleNamespace(
    **{
        name: getattr(module, name)
        for module in (
            agent_models,
            api_key_models,
            card_models,
            connection_models,
            conversation_models,
            fact_models,
            memory_models,
            run_models,
            usage_models,
        )
        for name in dir(module)
        if isinstance(getattr(module, name), type) or name in ("RunKind", "RunStatus")
    }
)
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
WEBHOOK = ("POST", "/api/agents/{agentId}/webhook")
HEALTH = ("GET", "/api/health")  # no token: a person setting the stack up checks it
# No token (TL9): the browser returning from an authorization server (its one-time state is the
# proof), and Engram's client metadata document, which authorization servers fetch.
OAUTH_PUBLIC = {("GET", "/api/connections/oauth/callback"), ("GET", "/api/connections/oauth/client-metadata.json")}
# RFC 9728's metadata of /mcp: read before signing in (MX4).
PRM = {("GET", "/.well-known/oauth-protected-resource"), ("GET", "/.well-known/oauth-protected-resource/mcp")}
# GET and DELETE /mcp answer 405 to anyone (MX5): nothing to protect, so no token asked.
# RFC 8414 metadata and RFC 7591 registration (MX4): public, as those RFCs expect.
REGISTRATION = ("POST", "/api/oauth/register")
AS_METADATA = {("GET", "/.well-known/oauth-authorization-server"), REGISTRATION}
NO_TOKEN = {HEALTH, *OAUTH_PUBLIC, ("GET", "/mcp"), ("DELETE", "/mcp"), *PRM, *AS_METADATA}
# The webhook reads its raw body itself (the HMAC covers the exact bytes), so no route parameter names its model.
RAW_BODY_MODELS = {WEBHOOK: models.WebhookIn}
RESOURCE_SCHEMAS = {
    "Agent": models.Agent,
    "Workspace": models.Workspace,
    "Session": models.Session,
    "Run": models.Run,
    "UsageRow": models.UsageRow,
    "Usage": models.Usage,
    "Memory": models.Memory,
    "Fact": models.Fact,
    "CardType": models.CardType,
    "Decision": models.Decision,
    "ActiveMemory": models.ActiveMemoryStatus,
    "RunMemoryEntry": run_memory_models.RunMemoryEntry,
    "ExportJob": account_models.ExportJob,
    "ApiKey": models.ApiKey,
}
# Limits the use cases check against Settings (so REST, tools and extraction agree), and the
# thresholds responses report against; the document states them in the field's description as
# "<ENV_NAME> (default <n>)".
SETTINGS_LIMITS = {
    ("MessageIn", "message"): ("message_max_chars",),
    ("WebhookIn", "message"): ("message_max_chars",),
    ("MemoryCreate", "key"): ("memory_key_max_chars",),
    ("MemoryCreate", "value"): ("memory_value_max_chars",),
    ("MemoryUpdate", "value"): ("memory_value_max_chars",),
    ("FactCreate", "fact"): ("fact_min_chars", "fact_max_chars"),
    ("FactUpdate", "fact"): ("fact_min_chars", "fact_max_chars"),
    ("RunCreate", "inputs"): ("run_memory_value_max_bytes",),
    ("ActiveMemory", "warning"): ("active_memory_warn_runs",),
}


# --- helpers --------------------------------------------------------------------------------
def to_openapi_path(rule: str) -> str:
    return re.sub(r"<(\w+)>", r"{\1}", rule)


def code_routes() -> dict[tuple[str, str], Any]:
    """(METHOD, /path/{param}) -> handler, from the routers' `_routes` ((rule, methods, ...) -> func)."""
    routes: dict[tuple[str, str], Any] = {}
    for router in ROUTERS:
        for key, func in router._routes.items():
            rule, methods = key[0], key[1]
            for method in (methods,) if isinstance(methods, str) else methods:
                routes[(method.upper(), to_openapi_path(rule))] = func
    return routes


def resolve(node: Any) -> Any:
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"only local $refs are used: {ref}"
        node = DOC
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and part in node, f"unresolved $ref {ref}"
            node = node[part]
        seen += 1
        assert seen < 20, f"$ref cycle at {ref}"
    return node


def operations() -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method in HTTP_METHODS:
                yield method.upper(), path, item, op


def parameters(item: dict[str, Any], op: dict[str, Any]) -> list[dict[str, Any]]:
    merged = {}
    for p in [resolve(p) for p in item.get("parameters", [])] + [resolve(p) for p in op.get("parameters", [])]:
        merged[(p["name"], p["in"])] = p  # operation-level overrides path-level
    return list(merged.values())


def by_alias(model: type[BaseModel]) -> set[str]:
    """The fields a model writes (an `exclude=True` field is internal: never in a response)."""
    return {f.alias or name for name, f in model.model_fields.items() if not f.exclude}


def required_by_alias(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items() if f.is_required()}


def schema_properties(schema: dict[str, Any]) -> dict[str, Any]:
    schema = resolve(schema)
    props = dict(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        props.update(schema_properties(part))
    return props


LIMIT_KEYS = ("minLength", "maxLength", "pattern", "minItems", "maxItems")


def limits(prop: dict[str, Any]) -> dict[str, Any]:
    """The constraints of a property, whether written flat (the doc) or as anyOf [X, null] (pydantic)."""
    if str(prop.get("$ref", "")).startswith("#/$defs/"):
        return {}  # a nested model of the code's schema: its own fields are checked where it is a body
    prop = resolve(prop)
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    out: dict[str, Any] = {}
    for b in branches:
        out.update({k: b[k] for k in LIMIT_KEYS if k in b})
        if "items" in b:
            out["items"] = limits(b["items"])
    return out


def query_params_of(func: Any, path: str) -> set[str]:
    path_params = set(re.findall(r"{(\w+)}", path))
    hints = typing.get_type_hints(func, include_extras=True)
    names = set()
    for name in inspect.signature(func).parameters:
        hint = hints.get(name)
        if name in path_params or (isinstance(hint, type) and issubclass(hint, BaseModel)):
            continue
        if any(isinstance(m, Depends) for m in typing.get_args(hint)[1:]):
            continue  # resolved by powertools (the stores, the caller): not a parameter of the request
        alias = next((getattr(m, "alias", None) for m in typing.get_args(hint)[1:] if getattr(m, "alias", None)), None)
        names.add(alias or name)
    return names


def body_model_of(key: tuple[str, str], func: Any) -> type[BaseModel] | None:
    hints = typing.get_type_hints(func)
    found = [h for h in hints.values() if isinstance(h, type) and issubclass(h, BaseModel)]
    return found[0] if found else RAW_BODY_MODELS.get(key)


# Routes whose answer is another protocol's: the MCP SDK's transport sets the status (a JSON-RPC
# response, or 202 for a notification).
# The OAuth callback answers the person's browser a page; the client metadata document is OAuth's
# own JSON, not the envelope.
SDK_STATUSES = {
    ("POST", "/mcp"): {"200", "202"},
    ("GET", "/api/connections/oauth/callback"): {"200"},
    ("GET", "/api/connections/oauth/client-metadata.json"): {"200"},
    **{route: {"200"} for route in PRM},
    ("GET", "/.well-known/oauth-authorization-server"): {"200"},
    REGISTRATION: {"201"},
}


def success_statuses(func: Any) -> set[str]:
    """`return ok(x)` is 200, `return ok(x, 201)` 201, `return ok(x, 201 if c else 200)` both;
    `return _helper(...)` counts the statuses of that module-level helper."""
    import ast
    import textwrap

    statuses: set[str] = set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)):
            continue
        call, name = node.value, node.value.func.id
        if name == "ok":
            status = call.args[1] if len(call.args) > 1 else None
            if status is None:
                statuses.add("200")
            elif isinstance(status, ast.IfExp):
                statuses |= {str(status.body.value), str(status.orelse.value)}  # type: ignore[attr-defined]
            else:
                statuses.add(str(status.value))  # type: ignore[attr-defined]
        elif name.startswith("_"):
            statuses |= success_statuses(func.__globals__[name])
    return statuses


# --- routes ---------------------------------------------------------------------------------
def test_doc_routes_equal_router_routes():
    documented = {(m, p) for m, p, _, _ in operations()}
    assert documented == set(code_routes())


def test_doc_routes_equal_template_http_api_events():
    template_path = ROOT / "template.yaml"
    if not template_path.exists():
        pytest.skip("template.yaml is not there yet")
    template = load_yaml(template_path.read_text(encoding="utf-8"))
    events, open_routes = set(), set()
    for resource in (template.get("Resources") or {}).values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        for event in ((resource.get("Properties") or {}).get("Events") or {}).values():
            if event.get("Type") == "HttpApi":
                props = event.get("Properties") or {}
                route = (str(props.get("Method", "")).upper(), props.get("Path"))
                if route == ("OPTIONS", "/{proxy+}"):
                    continue  # CORS preflights, answered by the function's CORS config: not an operation
                if route[1] == "/" or str(route[1]).startswith("/console/"):
                    continue  # the console's page and files (engram.console): not JSON operations
                events.add(route)
                if (props.get("Auth") or {}).get("Authorizer") == "NONE":
                    open_routes.add(route)
    assert events == {(m, p) for m, p, _, _ in operations()}
    # The doc's `security: []` is the template's `Authorizer: NONE`, but for POST /mcp, which checks
    # its bearer token itself (so that its 401 can say how to sign in, MX4).
    self_authorized = {("POST", "/mcp")}
    assert open_routes - self_authorized == {(m, p) for m, p, _, op in operations() if op.get("security") == []}


def test_query_parameters_match_handlers():
    routes = code_routes()
    for method, path, item, op in operations():
        documented = {p["name"] for p in parameters(item, op) if p["in"] == "query"}
        assert documented == query_params_of(routes[(method, path)], path), f"{method} {path}"


def test_dependencies_are_not_request_parameters():
    """The stores and the caller reach a route through powertools' `Depends`: the schema powertools
    builds from the handlers lists the same query parameters as the doc, and none of those."""
    app = build_app(*ROUTERS)
    generated = app.get_openapi_schema().paths or {}
    for method, path, item, op in operations():
        made = getattr(generated[path], method.lower())
        query = {p.name for p in made.parameters or [] if str(getattr(p.in_, "value", p.in_)) == "query"}
        assert query == {p["name"] for p in parameters(item, op) if p["in"] == "query"}, f"{method} {path}"


def test_success_statuses_match_handlers():
    routes = code_routes()
    for method, path, _, op in operations():
        documented = {code for code in op["responses"] if str(code).startswith("2")}
        expected = SDK_STATUSES.get((method, path)) or success_statuses(routes[(method, path)])
        assert documented == expected, f"{method} {path}"


def test_security_bearer_everywhere_but_the_signed_webhook_and_health():
    assert DOC["security"] == [{"bearerAuth": []}]
    scheme = DOC["components"]["securitySchemes"]["bearerAuth"]
    assert {k: v for k, v in scheme.items() if k != "description"} == {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    assert "egk_" in scheme["description"]  # or an API key
    for method, path, item, op in operations():
        if (method, path) == WEBHOOK:
            assert op["security"] == []
            headers = {p["name"]: p for p in parameters(item, op) if p["in"] == "header"}
            assert set(headers) == {"X-Engram-Timestamp", "X-Engram-Signature"}
            assert all(h["required"] for h in headers.values())
            signature = webhooks.sign("secret", "1700000000", '{"message":"hi"}')
            assert re.fullmatch(headers["X-Engram-Signature"]["schema"]["pattern"], signature)
            assert "401" in op["responses"]
        elif (method, path) in NO_TOKEN:
            assert op["security"] == [] and "401" not in op["responses"]
        else:
            assert op.get("security", DOC["security"]) == [{"bearerAuth": []}], f"{method} {path}"
            assert "401" in op["responses"], f"{method} {path}"


# --- request bodies -------------------------------------------------------------------------
def test_request_bodies_match_models():
    checked = set()
    for key, func in code_routes().items():
        method, path = key
        op = DOC["paths"][path][method.lower()]
        model = body_model_of(key, func)
        if key == REGISTRATION:
            continue  # RFC 7591's client metadata: unknown fields are ignored, as that RFC asks
        if model is None:
            assert "requestBody" not in op, f"{method} {path} takes no body"
            continue
        checked.add(model)
        schema = resolve(op["requestBody"]["content"]["application/json"]["schema"])
        props = schema["properties"]
        assert set(props) == by_alias(model), f"{method} {path} ({model.__name__})"
        assert set(schema.get("required", [])) == required_by_alias(model), f"{method} {path}"
        assert schema.get("additionalProperties") is False, f"{method} {path}"
        code_props = model.model_json_schema(by_alias=True)["properties"]
        for name, prop in props.items():
            assert limits(prop) == limits(code_props[name]), f"{model.__name__}.{name}"
    expected = {
        models.AgentCreate,
        models.AgentUpdate,
        models.ConnectionCreate,
        models.ConnectionUpdate,
        models.ApiKeyCreate,
        models.WorkspaceCreate,
        models.WorkspaceUpdate,
        models.SessionCreate,
        models.MessageIn,
        models.WebhookIn,
        models.MemoryCreate,
        models.MemoryUpdate,
        models.PinBody,
        models.FactCreate,
        models.FactUpdate,
        models.MeUpdate,
        models.CardTypeBody,
        models.RunCreate,
        models.RunUpdate,
        ApprovalIn,
    }
    assert checked == expected


@pytest.mark.parametrize("schema_name, field", sorted(SETTINGS_LIMITS))
def test_settings_limits_are_stated(schema_name, field):
    description = DOC["components"]["schemas"][schema_name]["properties"][field]["description"]
    for name in SETTINGS_LIMITS[(schema_name, field)]:
        setting = Settings.model_fields[name]
        assert f"{setting.alias} (default {setting.default})" in description, f"{schema_name}.{field}: {name}"


# --- responses ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(RESOURCE_SCHEMAS))
def test_resource_schemas_list_the_model_fields(name):
    model = RESOURCE_SCHEMAS[name]
    schema = DOC["components"]["schemas"][name]
    assert set(schema["properties"]) == by_alias(model)
    assert set(schema["required"]) == by_alias(model)  # model_dump always writes every field


def test_webhook_secret_only_in_the_create_and_rotate_responses():
    created = schema_properties(DOC["components"]["schemas"]["AgentCreated"])
    assert set(created) == by_alias(models.Agent) | {"webhookSecret"}
    holders = [n for n, s in DOC["components"]["schemas"].items() if "webhookSecret" in s.get("properties", {})]
    assert holders == ["WebhookSecretRotated"]  # and AgentCreated's allOf part
    rotated = DOC["paths"]["/api/agents/{agentId}/webhook-secret"]["post"]["responses"]["200"]
    assert "WebhookSecretRotated" in json.dumps(rotated)


def test_turn_result_schema_matches_public():
    run = models.Run(id="run_1", created_at="t", updated_at="t", agent_id="ag_1", session_id="dashboard")
    public = turns.TurnOutcome(
        run=run, reply="hi", tool_calls=[{"name": "x", "input": {}, "result": 1, "isError": False}]
    ).public()
    schemas = DOC["components"]["schemas"]
    assert set(schemas["TurnResult"]["properties"]) == set(public)
    assert set(schemas["ToolCall"]["required"]) == set(public["toolCalls"][0])
    # An MCP call carries its details (connection, duration, bytes, error, ...): all documented.
    mcp_call = {"name": "mcp__c__t", "input": {}, "result": "r", "toolUseId": "toolu_1"}
    mcp_call |= {key: 1 for key in TOOL_CALL_DETAILS}
    shown = turns.TurnOutcome(run=run, reply="hi", tool_calls=[mcp_call]).public()["toolCalls"][0]
    assert set(schemas["ToolCall"]["properties"]) == set(shown)
    assert set(schemas["Usage"]["properties"]) == set(public["usage"])


def test_run_started_schema_matches_the_accepted_response():
    run = models.Run(
        id="run_2",
        created_at="t",
        updated_at="t",
        agent_id="ag_1",
        kind="reexamination",
        trigger="reexamine",
        parent_run_id="run_1",
    )
    response = run_routes._accepted(run)
    assert response.status_code == 202
    data = json.loads(response.body)["data"]
    started = DOC["components"]["schemas"]["RunStarted"]
    assert set(started["properties"]) == set(started["required"]) == set(data)
    assert data["kind"] in started["properties"]["kind"]["enum"]


def test_run_memory_schema_matches_the_listing(monkeypatch):
    entry = run_memory_models.RunMemoryEntry(
        key="input:ticker", kind="input", value="ACME", created_at="t", updated_at="t", value_bytes=6
    )
    run = models.Run(id="run_1", created_at="t", updated_at="t", agent_id="ag_1", kind="manual")
    deps = SimpleNamespace(
        runs=SimpleNamespace(get=lambda t, run_id: run), run_memory=SimpleNamespace(page=lambda t, a, r, **kw: ([entry], None))
    )
    out = services.run_memory(deps.runs, deps.run_memory, "t1", "run_1", 50, None)
    schema = DOC["components"]["schemas"]["RunMemory"]
    assert set(schema["properties"]) == set(schema["required"]) == set(out)
    assert schema["properties"]["items"]["items"] == {"$ref": "#/components/schemas/RunMemoryEntry"}
    assert set(DOC["components"]["schemas"]["RunMemoryEntry"]["properties"]) == set(out["items"][0])
    # A council member's run answers with its council's (the lead's) run memory, as documented.
    lead = models.Run(id="run_lead", created_at="t", updated_at="t", agent_id="ag_lead", kind="manual")
    member = models.Run(
        id="run_m", created_at="t", updated_at="t", agent_id="ag_1", kind="council_member", council_run_id="run_lead"
    )
    deps = SimpleNamespace(
        runs=SimpleNamespace(get=lambda t, run_id: {"run_m": member, "run_lead": lead}[run_id]),
        run_memory=SimpleNamespace(page=lambda t, a, r, **kw: ([entry], None)),
    )
    assert services.run_memory(deps.runs, deps.run_memory, "t1", "run_m", 50, None)["runId"] == "run_lead"


def test_run_enums_match_the_model():
    run = DOC["components"]["schemas"]["Run"]["properties"]
    assert set(run["kind"]["enum"]) == set(typing.get_args(models.RunKind))
    assert set(run["status"]["enum"]) == set(typing.get_args(models.RunStatus))
    assert set(run["resolutionStatus"]["enum"]) - {None} == set(
        typing.get_args(models.RunUpdate.model_fields["resolution_status"].annotation)
    )


def test_pages_and_envelope():
    schemas = DOC["components"]["schemas"]
    for page in (
        "AgentPage",
        "WorkspacePage",
        "SessionPage",
        "RunPage",
        "MemoryPage",
        "FactPage",
        "CardTypePage",
        "DecisionPage",
    ):
        assert set(schemas[page]["properties"]) == {"items", "nextToken"}
    assert set(schemas["UsagePage"]["properties"]) == {"items", "nextToken", "totals", "breakdown"}
    assert set(schemas["Success"]["properties"]) == {"success", "data"}
    assert set(schemas["ErrorEnvelope"]["properties"]) == {"success", "error"}
    assert {"code", "message", "field"} <= set(schemas["Error"]["properties"])


def _fake_deps() -> Any:
    """Just enough of each repository for account.inline_export / account.delete_everything: one of everything."""
    stamp = {"created_at": "t", "updated_at": "t"}
    agent = models.Agent(id="ag_1", name="a", model="m", **stamp)
    workspace = models.Workspace(id="ws_1", name="w", **stamp)
    session = models.Session(id="dashboard", agent_id="ag_1", **stamp)
    run = models.Run(id="run_1", agent_id="ag_1", **stamp)
    memory = models.Memory(id="m_1", key="k", value="v", scope="agent", **stamp)
    fact = models.Fact(id="f_1", fact="likes tea", **stamp)
    card_type = models.CardType(id="c", name="c", created_at="t", updated_at="t", fields={"x": {"type": "string"}})
    api_key = models.ApiKey(id="key_1", created_at="t", updated_at="t", name="n", scopes=["read"], hint="egk_AbCd")
    connection = models.Connection(
        id="conn_1", created_at="t", updated_at="t", name="market", url="https://tools.example.com/mcp"
    )
    usage = models.UsageRow(id="u_1", created_at="t", agent_id="ag_1", session_key="dashboard", run_id="run_1", model="m")
    entry = run_memory_models.RunMemoryEntry(key="input:x", kind="input", value=1, created_at="t", updated_at="t", value_bytes=1)
    recorded = Trace("run_1")
    recorded.end(recorded.start("invoke_agent a", "agent", span_id=recorded.root_id))
    trace = {**recorded.stored(), "runId": "run_1"}
    one_page = lambda item: lambda *a, **kw: ([item], None)  # noqa: E731
    return SimpleNamespace(
        agents=SimpleNamespace(
            page=one_page(agent), delete_cascade=lambda t, agent_id: ["dashboard"], forget_quotas=lambda t: None
        ),
        workspaces=SimpleNamespace(page=one_page(workspace), delete=lambda t, workspace_id: None),
        sessions=SimpleNamespace(page=one_page(session)),
        runs=SimpleNamespace(
            page=one_page(run), delete_all=lambda t: 0, traces=SimpleNamespace(agent_parts=lambda t, a: [trace])
        ),
        memories=SimpleNamespace(all=lambda t, scope, owner_id: [memory], delete_owner=lambda t, scope, owner_id: 1),
        facts=SimpleNamespace(all=lambda t: [fact], delete_all=lambda t: 1),
        profiles=SimpleNamespace(name=lambda t: "Caroline"),
        card_types=SimpleNamespace(all=lambda t: [card_type], delete_all=lambda t: 0),
        connections=SimpleNamespace(all=lambda t: [connection], delete_all=lambda t: 1),
        api_keys=SimpleNamespace(all=lambda t: [api_key], delete_all=lambda t: 1),
        streams=SimpleNamespace(delete_all=lambda t: []),  # no open sockets to close
        usage=SimpleNamespace(page=one_page(usage), delete_all=lambda t: 1, all_totals=lambda t: [{"period": "2026-11"}]),
        exports=SimpleNamespace(delete_all=lambda t: 1),
        export_objects=SimpleNamespace(delete_prefix=lambda prefix: 1),
        settings=Settings(),
        run_memory=SimpleNamespace(agent_entries=lambda t, agent_id: [("run_1", entry)]),
        archive=SimpleNamespace(
            agent_items=lambda t, agent_id: iter(
                [
                    {
                        "kind": "msg",
                        "sessionId": "dashboard",
                        "runId": "run_1",
                        "seq": 0,
                        "role": "user",
                        "text": "hi",
                        "createdAt": "t",
                        "archivedAt": "t",
                    }
                ]
            )
        ),
        history=SimpleNamespace(
            load=lambda t, agent_id, session_id, committed_run: SimpleNamespace(messages=[{"role": "user", "content": []}]),
            delete_agent=lambda t, agent_id: 1,
            tool_results=lambda t, agent_id: iter([("run_1", "toolu_1", {"content": [{"type": "text", "text": "x"}]})]),
        ),
    )


def test_export_schema_matches_account_export():
    out = account.inline_export(_fake_deps(), "t1")
    schemas = DOC["components"]["schemas"]
    export = schemas["Export"]
    assert set(export["properties"]) == set(out) == set(export["required"])
    assert set(schema_properties(export["properties"]["agents"]["items"])) == set(out["agents"][0])
    assert set(schema_properties(export["properties"]["workspaces"]["items"])) == set(out["workspaces"][0])
    agent_item = schema_properties(export["properties"]["agents"]["items"])
    assert set(agent_item["toolResults"]["items"]["properties"]) == set(out["agents"][0]["toolResults"][0])
    assert agent_item["traces"]["items"] == {"$ref": "#/components/schemas/RunTracePart"}
    assert set(schemas["RunTracePart"]["properties"]) == set(out["agents"][0]["traces"][0])
    assert set(schemas["TraceSpan"]["required"]) == set(out["agents"][0]["traces"][0]["spans"][0])
    assert set(schema_properties(agent_item["sessions"]["items"])) == set(out["agents"][0]["sessions"][0])
    archived = schemas["ArchivedMessage"]
    assert set(out["agents"][0]["archive"][0]) <= set(archived["properties"]) and set(archived["required"]) <= set(
        out["agents"][0]["archive"][0]
    )
    for name, item_schema in (
        ("facts", "Fact"),
        ("runs", "Run"),
        ("usage", "UsageRow"),
        ("cardTypes", "CardType"),
        ("connections", "Connection"),
        ("apiKeys", "ApiKey"),
    ):
        assert export["properties"][name]["items"] == {"$ref": f"#/components/schemas/{item_schema}"}
        assert set(schemas[item_schema]["properties"]) == set(out[name][0]), name
    for holder in (agent_item, schema_properties(export["properties"]["workspaces"]["items"])):
        assert holder["memories"]["items"] == {"$ref": "#/components/schemas/Memory"}


def test_account_deleted_schema_matches_delete_everything():
    counts = account.delete_everything(_fake_deps(), "t1")
    deleted = DOC["components"]["schemas"]["AccountDeleted"]
    assert set(deleted["properties"]) == set(deleted["required"]) == {"deleted"}
    assert set(deleted["properties"]["deleted"]["properties"]) == set(counts) == set(deleted["properties"]["deleted"]["required"])


# --- structure ------------------------------------------------------------------------------
def _walk_refs(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield where, node["$ref"]
        for k, v in node.items():
            yield from _walk_refs(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk_refs(v, f"{where}/{i}")


def test_document_structure():
    assert str(DOC["openapi"]).startswith("3.1")
    refs = list(_walk_refs(DOC))
    assert refs
    for where, ref in refs:
        assert resolve({"$ref": ref}) is not None, where
    op_ids = [op["operationId"] for _, _, _, op in operations()]
    assert len(op_ids) == len(set(op_ids))
    for method, path, item, op in operations():
        declared = {p["name"]: p for p in parameters(item, op) if p["in"] == "path"}
        assert set(declared) == set(re.findall(r"{(\w+)}", path)), f"{method} {path}"
        assert all(p.get("required") is True for p in declared.values()), f"{method} {path}"
        assert op["responses"], f"{method} {path}"


def test_document_validates_as_openapi_3_1():
    validator = pytest.importorskip("openapi_spec_validator")  # installed with moto[server]
    try:
        validator.validate(DOC)
    except Exception as err:  # the error's repr embeds the whole document
        pytest.fail(f"{type(err).__name__}: {str(err)[:400]}")
