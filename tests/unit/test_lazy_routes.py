"""The api function includes each router with the first request under its prefixes (issue 33,
item 7): it must route every request exactly as the app that includes them all at once, whatever
order the requests come in, on any thread; and the prefixes must say where each router's routes are."""

from __future__ import annotations

import importlib.util
import itertools
import queue
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from engram.api.http import build_app, cors_of
from engram.api.routing import Resolver, RouterSpec
from local.apigw import build_http_event

ROOT = Path(__file__).resolve().parents[2]
DOC: dict[str, Any] = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text(encoding="utf-8"))
ORIGIN = "https://app.example.com"


def _api_function() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engram_api_function_under_test", ROOT / "functions" / "api" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPECS: tuple[RouterSpec, ...] = _api_function().ROUTERS
ROUTERS: dict[RouterSpec, Router] = {spec: spec.load() for spec in SPECS}
HANDLERS = {func for router in ROUTERS.values() for func in router._routes.values()}


def _routes() -> Iterator[tuple[RouterSpec, str, str]]:
    """(spec, method, rule) of every route of every router the api function serves."""
    for spec, router in ROUTERS.items():
        for rule, methods, *_ in router._routes:
            for method in methods:
                yield spec, method, rule


def _segments(path: str) -> list[str]:
    return path.split("/")[1:]


def _placeholder(segment: str) -> bool:
    return segment.startswith("<") and segment.endswith(">")


def _covers(prefix: str, method: str, rule: str) -> bool:
    """Whether `prefix` claims every request the route (method, rule) matches."""
    wanted, _, path = prefix.rpartition(" ")
    own, theirs = _segments(path), _segments(rule)
    if (wanted and wanted != method) or len(theirs) < len(own):
        return False
    return all(
        mine == "*" or (mine == segment and not _placeholder(segment))
        for mine, segment in zip(own, theirs[: len(own)], strict=True)
    )


def test_every_route_is_under_its_own_routers_prefixes_and_no_other_spec_claims_it_as_closely():
    for spec, method, rule in _routes():
        claims = [
            (len(_segments(p.rpartition(" ")[2])), other.module)
            for other in SPECS
            for p in other.prefixes
            if _covers(p, method, rule)
        ]
        assert claims, f"{method} {rule} ({spec.module}) is under none of its prefixes"
        closest = max(length for length, _ in claims)
        assert {module for length, module in claims if length == closest} == {spec.module}, f"{method} {rule}"


def test_each_spec_names_its_routers_methods_and_every_prefix_claims_a_route():
    for spec, router in ROUTERS.items():
        assert set(spec.methods) == {m for _, methods, *_ in router._routes for m in methods}, spec.module
        for prefix in spec.prefixes:
            assert any(_covers(prefix, m, r) for s, m, r in _routes() if s is spec), f"{spec.module}: {prefix} claims nothing"


def _may_match_one_request(rule: str, other: str) -> bool:
    mine, theirs = _segments(rule), _segments(other)
    return len(mine) == len(theirs) and all(
        a == b or _placeholder(a) or _placeholder(b) for a, b in zip(mine, theirs, strict=True)
    )


def test_no_request_matches_routes_of_two_routers():
    # So the order the routers are included in (the order requests come in) never matters.
    for (spec, method, rule), (other, method2, rule2) in itertools.combinations(list(_routes()), 2):
        if spec is not other and method == method2:
            assert not _may_match_one_request(rule, rule2), f"{method} {rule} ({spec.module}) and {rule2} ({other.module})"


# --- the lazy app routes as the whole one ----------------------------------------------------------


def _which_handler(app: Any, next_middleware: NextMiddleware) -> Response[str]:
    """A route of a router answers with its name, not its work (validation has run before)."""
    route = app.context.get("_route")
    if route is not None and route.func in HANDLERS:
        name = f"{route.method} {route.rule.pattern} {route.func.__module__}.{route.func.__qualname__}"
        return Response(status_code=299, content_type="text/plain", body=name)
    return next_middleware(app)


def _apps(cors: bool) -> tuple[Resolver, Resolver]:
    config = cors_of(ORIGIN if cors else "")
    whole, lazy = build_app(*ROUTERS.values(), cors=config), build_app(*SPECS, cors=config)
    for app in (whole, lazy):
        app.use(middlewares=[_which_handler])
    return whole, lazy


def _requests() -> list[tuple[str, str, str, str | None]]:
    """(method, route key, path, body): every documented operation (with an empty JSON object as
    its body where it takes one), preflights, and paths and methods no route has."""
    out: list[tuple[str, str, str, str | None]] = []
    for template, item in DOC["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x1", template)
        for method in item:
            if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                out.append(
                    (method.upper(), f"{method.upper()} {template}", path, "{}" if "requestBody" in item[method] else None)
                )
                out.append((method.upper(), f"{method.upper()} {template}", path + "/", None))
        out.append(("OPTIONS", "OPTIONS /{proxy+}", path, None))
    odd = [
        "/",
        "//",
        "/api",
        "/api/",
        "/api/agentsx",
        "/api/agents/x1/unknown",
        "/api/agents/x1/memories/m1/pin/x",
        "/console",
        "/console/app.js",
        "/console/a/b",
        "/mcp/",
        "/.well-known",
        "/.well-known/nothing",
        "/api/me/",
        "/api/me/nothing",
        "/api/runs/r1/approvals/x",
        "/api/oauth",
        "/api/workspaces/w1/memories/m1",
        "/nothing",
        "/api/health/",
    ]
    for path, method in itertools.product(odd, ("GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS")):
        out.append((method, "$default", path, "{}" if method in ("POST", "PUT") else None))
    out += [
        ("PUT", "$default", "/api/agents", "{}"),
        ("HEAD", "$default", "/api/agents", None),
        ("PATCH", "$default", "/mcp", "{}"),
    ]
    return out


def _answer(app: Resolver, request: tuple[str, str, str, str | None]) -> tuple[int, str, dict[str, str]]:
    method, route_key, path, body = request
    params = {"proxy": path.lstrip("/")} if route_key.endswith("{proxy+}") else None
    headers = {"origin": ORIGIN, "content-type": "application/json", "access-control-request-method": "POST"}
    event = build_http_event(
        route_key,
        method,
        path,
        headers=headers,
        body=body.encode() if body else None,
        path_params=params,
        claims=None if method == "OPTIONS" else {"sub": "u1"},
    )
    out = app.resolve(event, None)
    return out["statusCode"], str(out.get("body")), {k.lower(): str(v) for k, v in (out.get("headers") or {}).items()}


@pytest.mark.parametrize("cors", [False, True], ids=["no-cors", "cors"])
def test_the_lazy_app_routes_every_request_as_the_whole_app_in_any_order(cors):
    requests = _requests()
    whole, lazy = _apps(cors)
    expected = [_answer(whole, request) for request in requests]
    assert sum(status == 299 for status, _, _ in expected) > 40  # most documented operations reached their handler
    assert [_answer(lazy, request) for request in reversed(requests)] == list(reversed(expected))
    _, in_order = _apps(cors)
    assert [_answer(in_order, request) for request in requests] == expected


def test_environments_on_threads_include_their_routers_side_by_side_and_route_alike():
    # The local stack runs a function's execution environments on threads, one request at a time
    # each, every environment with its own app over the same (module singleton) routers.
    requests = [r for r in _requests() if r[1] != "$default"]
    whole, _ = _apps(cors=True)
    expected = [_answer(whole, request) for request in requests]
    environments: queue.Queue[Resolver] = queue.Queue()
    for _ in range(4):
        environments.put(_apps(cors=True)[1])

    def serve(request: tuple[str, str, str, str | None]) -> tuple[int, str, dict[str, str]]:
        app = environments.get()
        try:
            return _answer(app, request)
        finally:
            environments.put(app)

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(serve, requests)) == expected
    while not environments.empty():  # each included each router it served once
        keys = environments.get()._route_keys
        assert len(keys) == len(set(keys)) and set(keys) <= set(whole._route_keys)


def test_the_openapi_document_of_the_lazy_app_with_every_router_is_the_whole_apps():
    whole, lazy = _apps(cors=False)
    lazy.include_all()
    assert lazy.get_openapi_json_schema() == whole.get_openapi_json_schema()


def test_a_request_includes_only_the_routers_whose_prefixes_claim_its_path():
    _, lazy = _apps(cors=False)
    assert lazy._route_keys == []
    _answer(lazy, ("GET", "GET /api/agents", "/api/agents", None))
    agents = next(spec for spec in SPECS if spec.module == "engram.agents.routes")
    assert len(lazy._route_keys) == len(ROUTERS[agents]._routes)
    _answer(lazy, ("GET", "GET /api/agents/{agentId}/memories", "/api/agents/a1/memories", None))
    memory = next(spec for spec in SPECS if spec.module == "engram.memory.routes")
    assert len(lazy._route_keys) == len(ROUTERS[agents]._routes) + len(ROUTERS[memory]._routes)
