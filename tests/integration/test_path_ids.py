"""Ids in paths that are not ids (found by tests/e2e/test_fuzz_http.py): each answer is one
docs/openapi.yaml gives the route, never a status it does not list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

DOC: dict[str, Any] = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml").read_text(encoding="utf-8"))


def response_schema(name: str) -> dict[str, Any]:
    """The document's response `name` as one JSON Schema (its components alongside, for $refs)."""
    schema = DOC["components"]["responses"][name]["content"]["application/json"]["schema"]
    return {**schema, "components": DOC["components"]}


# Characters API Gateway passes on (decoded) but powertools' route matching does not take.
@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("PUT", "/api/card-types/k%E2%88%B0", "name"),  # `∰`; this route has no 404 of its own
        ("GET", "/api/agents/a%22b", "agentId"),  # `"`
        ("GET", "/api/agents/a%0Ab/sessions/dashboard", "agentId"),  # a newline
        ("DELETE", "/api/workspaces/w/memories/%E2%88%B0", "memoryId"),  # `∰`
    ],
)
def test_an_id_the_router_cannot_match_is_a_400_invalid_id_not_a_missing_route(stack, method, path, field):
    reply = stack.call(method, path, body={"fields": {"x": {"type": "string"}}} if method == "PUT" else None)
    assert reply.status == 400, reply.body
    assert (reply.error["code"], reply.error["field"]) == ("invalid_id", field)


def test_an_id_holding_a_question_mark_or_slash_gets_api_gateways_404_which_the_document_lists(stack):
    # API Gateway decodes the path and cuts it at `?` (`/api/runs/a`: only a GET route), or a `/`
    # adds a segment: no route matches, the function never runs, the answer is API Gateway's own.
    for method, path in (("POST", "/api/runs/a%3F/re-examine"), ("PUT", "/api/card-types/a%2Fb")):
        reply = stack.call(method, path, body={})
        assert (reply.status, reply.body) == (404, {"message": "Not Found"}), path
        jsonschema.validate(reply.body, response_schema("NotFound"))
    put_card_type = DOC["paths"]["/api/card-types/{name}"]["put"]["responses"]
    assert put_card_type["404"]["$ref"] == "#/components/responses/NotFound"
    # the function's own 404 still fits the same schema
    reply = stack.call("GET", "/api/agents/ag_unknown")
    assert reply.status == 404 and reply.error["code"] == "not_found"
    jsonschema.validate(reply.body, response_schema("NotFound"))
