"""The resolver factory, the `{success, data?, error?}` envelope, auth, and error mapping in one place."""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import ValidationError

from engram.kernel.errors import EngramError, StorageUnavailable, Unauthorized, aws_unavailable
from engram.kernel.ids import tenant_key
from engram.kernel.observability import logger

MAX_BODY_BYTES = 256 * 1024

# Every answer is the JSON envelope as text.
Reply = Response[str]

# Query parameters every list route shares.
Limit = Annotated[int, Query(ge=1, le=100)]
Token = Annotated[str | None, Query(max_length=2048)]
IncludeArchived = Annotated[bool, Query()]


def envelope(status: int, *, data: Any = None, error: dict[str, Any] | None = None) -> Reply:
    body: dict[str, Any] = {"success": error is None}
    if error is None:
        body["data"] = data
    else:
        body["error"] = error
    return Response(status_code=status, content_type="application/json", body=json.dumps(body, ensure_ascii=False, default=str))


def ok(data: Any, status: int = 200) -> Reply:
    return envelope(status, data=data)


def fail(status: int, code: str, message: str, field: str | None = None, **extra: Any) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    error.update(extra)
    return envelope(status, error=error)


def deps_of(router: Router | APIGatewayHttpResolver) -> Any:
    """The function's dependencies: its handler puts them in the resolver's context
    (`app.append_context(deps=...)`) for every request."""
    return router.context["deps"]


def tenant(router: Router | APIGatewayHttpResolver) -> str:
    """The caller's tenant, from the JWT the authorizer verified (`sub`)."""
    try:
        claims = router.current_event.request_context.authorizer.jwt_claim or {}  # type: ignore[attr-defined]  # the HTTP API event
    except (AttributeError, KeyError, TypeError):
        claims = {}
    sub = claims.get("sub")
    if not sub:
        raise Unauthorized("a bearer token with a subject is required", code="unauthorized")
    return tenant_key(sub)


def _field_of(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts)


def _validation_response(errors: list[dict[str, Any]]) -> Reply:
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    field = _field_of(list(first.get("loc", ())))
    kind = first.get("type", "")
    if kind == "json_invalid":
        return fail(400, "invalid_body", "the request body is not valid JSON", field="body")
    if not field and kind in ("model_attributes_type", "dict_type", "missing", "model_type"):
        return fail(400, "invalid_body", "the request body must be a JSON object", field="body")
    if kind == "extra_forbidden":
        message = f"{field} is not a known field"
    else:
        message = f"{field or 'request'}: {first.get('msg', 'invalid value')}"
    details = [{"field": _field_of(e.get("loc", ())), "message": e.get("msg", "")} for e in errors[:10]]
    return fail(400, "validation_error", message, field=field or None, details=details)


def body_limit(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Reply:
    body = app.current_event.body or ""
    if body and app.current_event.http_method in ("POST", "PUT", "PATCH") and len(body) > MAX_BODY_BYTES:
        return fail(413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes", field="body")
    return next_middleware(app)


def build_app(*routers: Router) -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(enable_validation=True)
    app.use(middlewares=[body_limit])

    @app.exception_handler(EngramError)
    def _domain(err: EngramError) -> Reply:
        run_id = getattr(err, "run_id", None)  # TurnFailed, QueueUnavailable: the run that records it
        extra = {"runId": run_id} if run_id else {}
        if err.status >= 500:
            logger.warning("request failed", extra={"code": err.code, "error": err.message})
        return fail(err.status, err.code, err.message, err.field, **extra)

    @app.exception_handler(RequestValidationError)
    def _invalid(err: RequestValidationError) -> Reply:
        # Validation runs before any middleware, so an oversize body is recognised here.
        if len(app.current_event.body or "") > MAX_BODY_BYTES:
            return fail(413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes", field="body")
        return _validation_response(list(err.errors()))

    @app.exception_handler(ValidationError)
    def _invalid_model(err: ValidationError) -> Reply:
        return _validation_response([dict(e) for e in err.errors()])

    @app.exception_handler(json.JSONDecodeError)
    def _bad_json(_err: json.JSONDecodeError) -> Reply:
        return fail(400, "invalid_body", "the request body is not valid JSON", field="body")

    @app.not_found
    def _no_route(_err: NotFoundError) -> Reply:
        return fail(404, "route_not_found", f"no route {app.current_event.http_method} {app.current_event.path}")

    @app.exception_handler(Exception)
    def _unexpected(err: Exception) -> Reply:
        if aws_unavailable(err):
            logger.warning("an AWS service did not answer", extra={"error": repr(err)})
            return fail(StorageUnavailable.status, StorageUnavailable.code, StorageUnavailable.default_message)
        logger.exception("unhandled error")
        return fail(500, "internal_error", "an unexpected error occurred; it has been logged")

    for router in routers:
        app.include_router(router)
    return app
