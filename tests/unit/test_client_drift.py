"""The Python client (clients/python) against docs/openapi.yaml: every operation has a client
method with the path's ids as its leading arguments and the query parameters as keywords, every
request body and answer has a model whose field names and required keys are the schema's, and
models.py is what the generator makes of the document today. A change to the API that the client
does not follow fails here."""

from __future__ import annotations

import importlib.util
import inspect
import keyword
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from engram_client import models
from engram_client.client import OPERATIONS, Client

ROOT = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text(encoding="utf-8"))
SCHEMAS = SPEC["components"]["schemas"]
METHODS = ("get", "put", "post", "patch", "delete")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_models", ROOT / "clients" / "python" / "gen_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snake(name: str) -> str:
    """A field or parameter as a Python argument: snake_case; a keyword (`from`) with a trailing _."""
    out = re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
    return f"{out}_" if keyword.iskeyword(out) else out


def resolve(schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(properties, required) of an object schema, through $ref and allOf."""
    if "$ref" in schema:
        return resolve(SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]])
    props, required = set(schema.get("properties", {})), set(schema.get("required", []))
    for part in schema.get("allOf", []):
        p, r = resolve(part)
        props, required = props | p, required | r
    return props, required


def keys(typed_dict: type) -> tuple[set[str], set[str]]:
    return set(typing.get_type_hints(typed_dict)), set(typed_dict.__required_keys__)


def operations() -> list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]]:
    found = []
    for path, item in SPEC["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                op = item[method]
                params = [
                    p if "$ref" not in p else SPEC["components"]["parameters"][p["$ref"].rsplit("/", 1)[-1]]
                    for p in shared + op.get("parameters", [])
                ]
                found.append((method.upper(), path, op, params))
    return found


def data_schemas(op: dict[str, Any]) -> list[dict[str, Any]]:
    """The `data` schema of each success answer (inline ones as the generator names them)."""
    out = []
    for status, answer in op["responses"].items():
        schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
        for part in schema.get("allOf", []):
            if status.startswith("2") and "data" in part.get("properties", {}):
                data = part["properties"]["data"]
                out += data.get("oneOf", [data])  # a 202: queued, or paused (TL10)
    return out


# What a browser or an authorization server calls, never a program: the OAuth callback (a person's
# browser returning with a code) and Engram's client metadata document (TL9). No client method.
BROWSER_ONLY = {"connectionAuthorizationCallback", "getClientMetadataDocument"}
# RFC 7591 registration (MX4): what MCP clients' OAuth providers call, not Engram's client.
OAUTH_ONLY = {"registerOAuthClient"}
# GET and DELETE /mcp only ever answer 405 (MX5): nothing for a client to call; RFC 9728's
# metadata is for MCP clients' OAuth discovery, not for Engram's client.
OPS = [
    o
    for o in operations()
    if o[2]["operationId"] not in BROWSER_ONLY | OAUTH_ONLY
    and any(str(code).startswith("2") for code in o[2]["responses"])
    and not o[1].startswith("/.well-known/")
]


def test_every_operation_of_the_document_has_a_client_method_and_no_other():
    documented = {op["operationId"]: (method, path) for method, path, op, _ in OPS}
    assert {op["operationId"] for _, _, op, _ in operations()} >= BROWSER_ONLY  # still documented
    assert {k: (v.method, v.path) for k, v in OPERATIONS.items()} == documented
    for op in OPERATIONS.values():
        for name in op.methods:
            assert callable(getattr(Client, name, None)), f"Client.{name} is missing"


@pytest.mark.parametrize("method,path,op,params", OPS, ids=[o[2]["operationId"] for o in OPS])
def test_each_method_takes_the_paths_ids_and_the_query_parameters(method, path, op, params):
    path_ids = [snake(p) for p in re.findall(r"{(\w+)}", path)]
    query = {snake(p["name"]) for p in params if p["in"] == "query"} - {"async_"}  # ?async=true is queue_message
    for name in OPERATIONS[op["operationId"]].methods:
        signature = inspect.signature(getattr(Client, name))
        positional = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD][1:]
        assert positional[: len(path_ids)] == path_ids, f"{name}{signature} does not start with {path_ids}"
        if name.startswith("iter_"):  # an iterator pages itself: no next_token
            assert query - {"next_token"} <= set(signature.parameters), f"{name} lacks {query}"
        elif query:
            assert query <= set(signature.parameters) | set(positional), f"{name}{signature} lacks {query}"


@pytest.mark.parametrize("method,path,op,params", OPS, ids=[o[2]["operationId"] for o in OPS])
def test_request_bodies_have_the_schemas_field_names(method, path, op, params):
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is None or op["operationId"] == "mcp":
        return
    props, required = resolve(body)
    for name in OPERATIONS[op["operationId"]].methods:
        hints = typing.get_type_hints(getattr(Client, name), include_extras=True)
        if "body" in hints:  # **body: Unpack[Model]
            (model,) = typing.get_args(hints["body"])
            assert keys(model) == (props, required), f"{name}: {model.__name__} differs from the request body"
            assert model.__name__ == body["$ref"].rsplit("/", 1)[-1]
        else:  # a body of one or two fields is spelled out as arguments (snake_case)
            named = set(inspect.signature(getattr(Client, name)).parameters)
            assert {snake(p) for p in props} <= named, f"{name} lacks a field of {sorted(props)}"


@pytest.mark.parametrize("method,path,op,params", OPS, ids=[o[2]["operationId"] for o in OPS])
def test_answers_have_the_schemas_field_names(method, path, op, params):
    expected = [resolve(s) for s in data_schemas(op)]
    if not expected:  # POST /mcp answers JSON-RPC, not the envelope
        assert op["operationId"] == "mcp"
        return
    covered = []
    for name in OPERATIONS[op["operationId"]].methods:
        returned = typing.get_type_hints(getattr(Client, name))["return"]
        if typing.get_origin(returned) is Iterator:  # iter_x yields the page's items
            (item,) = typing.get_args(returned)
            page = data_schemas(op)[0]
            page = SCHEMAS[page["$ref"].rsplit("/", 1)[-1]] if "$ref" in page else page
            assert keys(item) == resolve(page["properties"]["items"]["items"]), f"{name} yields {item.__name__}"
            continue
        for one in typing.get_args(returned) if isinstance(returned, types.UnionType) else (returned,):
            assert keys(one) in expected, f"{name} returns {one.__name__}, not the documented answer"
            covered.append(keys(one))
    assert all(e in covered for e in expected), f"{op['operationId']}: an answer no method returns"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_models_field_names_and_required_keys_are_the_schemas(name):
    props, required = resolve(SCHEMAS[name])
    if not props:  # Id, Timestamp, NextTokenValue: plain strings in the models
        assert not hasattr(models, name)
        return
    assert keys(getattr(models, name)) == (props, required)


def test_models_py_is_what_the_generator_makes_of_the_document():
    generator = _generator()
    text = generator.formatted(generator.render(generator.load_spec()))
    assert generator.TARGET.read_text(encoding="utf-8") == text, (
        f"clients/python/engram_client/models.py is stale: run {sys.executable} clients/python/gen_models.py"
    )


def test_the_drift_test_notices_a_renamed_field():
    spec = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text(encoding="utf-8"))
    spec["components"]["schemas"]["Fact"]["properties"]["statement"] = spec["components"]["schemas"]["Fact"]["properties"].pop(
        "fact"
    )
    generator = _generator()
    assert "    statement: " in generator.render(spec)
    assert keys(models.Fact) != resolve(spec["components"]["schemas"]["Fact"])


def _doc_fields(cell: str) -> set[str]:
    """The field names a docs/streaming.md table cell names in backticks (`a, b?`, `error: {...}`)."""
    names = set()
    for chunk in re.findall(r"`([^`]+)`", cell):
        chunk = re.sub(r"\{[^}]*\}", "", chunk)  # error: {code, message}: the field is `error`
        for part in chunk.split(","):
            name = part.strip().split(":")[0].strip().rstrip("?")
            if re.fullmatch(r"[a-zA-Z]+", name):
                names.add(name)
    return names


def test_stream_event_models_have_the_fields_docs_streaming_md_names():
    from engram_client import streaming

    by_type = {}
    for model in typing.get_args(streaming.StreamEvent):
        for literal in typing.get_args(typing.get_type_hints(model)["type"]):
            by_type[literal] = set(typing.get_type_hints(model))
    doc = (ROOT / "docs" / "streaming.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z.]+)` \| (.*) \|$", doc, flags=re.M)
    events = {name: _doc_fields(cells) for name, cells in rows if "." in name}
    answers = {}  # the frames' answers: {type: "turn.queued", ...}
    for _, cells in rows:
        for answer in re.findall(r'`\{type: "([a-z.]+)", ([^}`]+)\}`', cells):
            answers[answer[0]] = {f.strip() for f in answer[1].split(",")}
    assert set(events) == {
        "turn.started",
        "text.delta",
        "tool.started",
        "tool.finished",
        "turn.completed",
        "turn.failed",
        "turn.keepalive",
        "approval.requested",
        "approval.decided",
    }
    for name, fields in {**events, **answers}.items():
        assert name in by_type, f"no model for the {name} event"
        carried = {"type"} | ({"runId", "seq"} if name in events else set())
        assert by_type[name] == fields | carried, (
            f"{name}: the model has {sorted(by_type[name])}, docs/streaming.md {sorted(fields)}"
        )
