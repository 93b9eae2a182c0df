"""CORS: by default no other origin may call the API (the console is served from the API's own
origin); CORS_ALLOW_ORIGINS (template parameter CorsAllowOrigins) names the ones that may."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import build_app, cors_of, ok
from local.apigw import build_http_event


def test_by_default_a_preflight_gets_no_cors_and_answers_carry_no_cors_headers(stack):
    preflight = stack.call(
        "OPTIONS", "/api/agents", user=None, headers={"origin": "https://evil.example", "access-control-request-method": "POST"}
    )
    assert preflight.status == 404 and preflight.error["code"] == "route_not_found"
    assert not any(name.startswith("access-control-") for name in preflight.headers)
    listed = stack.call("GET", "/api/agents", headers={"origin": "https://evil.example"})
    assert listed.status == 200 and "access-control-allow-origin" not in listed.headers


def _app(origins: str) -> Any:
    router = Router()

    @router.get("/api/ping")
    def ping() -> Any:
        return ok({"pong": True})

    return build_app(router, cors=cors_of(origins))


def _call(app: Any, method: str, origin: str, route_key: str = "GET /api/ping", **headers: str) -> tuple[int, dict[str, Any]]:
    event = build_http_event(
        route_key, method, "/api/ping", headers={"origin": origin, **headers}, body=None, claims={"sub": "u"}
    )
    out = app.resolve(event, None)
    return out["statusCode"], {k.lower(): v for k, v in (out.get("headers") or {}).items()}


def test_named_origins_get_preflights_and_headers_others_do_not():
    app = _app("https://app.example.com, https://admin.example.com")
    status, headers = _call(
        app, "OPTIONS", "https://admin.example.com", "OPTIONS /{proxy+}", **{"access-control-request-method": "POST"}
    )
    assert status == 204
    assert headers["access-control-allow-origin"] == "https://admin.example.com"
    assert "x-engram-signature" in headers["access-control-allow-headers"].lower()
    assert headers["access-control-max-age"] == "600"
    status, headers = _call(app, "GET", "https://app.example.com")
    assert status == 200 and headers["access-control-allow-origin"] == "https://app.example.com"
    status, headers = _call(app, "GET", "https://evil.example")
    assert status == 200 and "access-control-allow-origin" not in headers


def test_no_origins_means_no_cors_config():
    assert cors_of("") is None and cors_of(" , ") is None
    anyone = cors_of("*")
    assert (
        anyone is not None and anyone.to_dict("https://anyone.example")["Access-Control-Allow-Origin"] == "https://anyone.example"
    )
