"""The resolver factory, the `{success, data?, error?}` envelope, auth, and error mapping in one place."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.request import Request
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from pydantic import ValidationError

from engram.api.routing import Resolver, RouterSpec
from engram.aws import keys, quotas
from engram.kernel.errors import (
    BadBody,
    BadRequest,
    EngramError,
    Forbidden,
    StorageUnavailable,
    Unauthorized,
    aws_unavailable,
    error_body,
    invalid_input,
    not_json,
)
from engram.kernel.ids import check_id, tenant_key
from engram.kernel.observability import logger
from engram.kernel.scopes import granted_scopes as _granted_scopes
from engram.kernel.settings import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from engram.kernel.textsearch import QUERY_MAX_CHARS
from engram.kernel.validation import refuse_unstorable_numbers
from engram.wiring.stores import Stores

if TYPE_CHECKING:
    pass

MAX_BODY_BYTES = 256 * 1024
MAX_BODY_DEPTH = 32  # no request body of the API nests deeper than a few levels


def _depth(text: str) -> int:
    """How deep a JSON text nests (brackets outside strings), without parsing it: a body nested
    50,000 deep must not reach the recursive parser."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_body(text: str) -> dict[str, object]:
    """The request body as JSON, strictly: UTF-8 text of one JSON object, nested at most
    MAX_BODY_DEPTH deep, no number Python would refuse to convert or DynamoDB could not store.
    Anything else is a 400 naming the problem (powertools calls this for every JSON body, before
    any route runs)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes carried as surrogates
        raise BadBody("the request body is not valid UTF-8", field="body") from None
    if _depth(text) > MAX_BODY_DEPTH:
        raise BadBody(f"the request body nests deeper than {MAX_BODY_DEPTH} levels", field="body")
    try:
        value = json.loads(text)
    except ValueError as err:  # JSONDecodeError, and integers past Python's 4,300-digit limit
        reason = "a number in it is too long" if not isinstance(err, json.JSONDecodeError) else "it is not valid JSON"
        raise BadBody(f"the request body is not accepted: {reason}", field="body") from None
    if not isinstance(value, dict):
        raise BadBody("the request body must be a JSON object", field="body")
    # A number DynamoDB cannot store (1e-200, 1e126, NaN) is refused here, naming its field,
    # rather than failing the write it would reach (or the run that carries it).
    refuse_unstorable_numbers(value)
    return value


# Every answer is the JSON envelope as text.
Reply = Response[str]

# Query parameters every list route shares.
Limit = Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)]
Token = Annotated[str | None, Query(max_length=2048)]
IncludeArchived = Annotated[bool, Query()]
# A list's search (`q`: engram.kernel.textsearch), up to QUERY_MAX_CHARS characters.
SearchText = Annotated[str | None, Query(max_length=QUERY_MAX_CHARS)]


def listed(value: str | None) -> frozenset[str]:
    """A comma-separated query filter (`kind=chat,manual`) as a set; empty means no filter."""
    return frozenset(value.split(",")) if value else frozenset()


PAGE = LIST_LIMIT_DEFAULT  # the default `limit` of every list


def envelope(
    status: int, *, data: object = None, error: Mapping[str, object] | None = None, headers: dict[str, str] | None = None
) -> Reply:
    body: dict[str, Any] = {"success": error is None}
    if error is None:
        body["data"] = data
    else:
        body["error"] = error
    text = json.dumps(body, ensure_ascii=False, default=str)
    return Response(status_code=status, content_type="application/json", body=text, headers=headers)


def ok(data: object, status: int = 200, *, headers: dict[str, str] | None = None) -> Reply:
    return envelope(status, data=data, headers=headers)


def fail(status: int, code: str, message: str, field: str | None = None, **extra: object) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    error.update(extra)
    return envelope(status, error=error)


def stores(request: Request) -> Stores:
    """The function's dependencies: its handler puts them in the resolver's context
    (`app.append_context(deps=...)`) for every request; every function's are Stores. A route
    takes them as a `Deps` parameter (powertools' `Depends`; tests may override `stores`)."""
    deps = request.context["deps"]
    if not isinstance(deps, Stores):
        raise TypeError(f"the resolver's context carries {type(deps).__name__}, not the function's Stores")
    return deps


Deps = Annotated[Stores, Depends(stores)]


_REPLAYED_S = 300  # an arrival older than this is a replayed or sample event (`sam local invoke`), not a wait


def request_clock(router: Router | APIGatewayHttpResolver) -> tuple[float, float | None]:
    """How long ago API Gateway received this request (`requestContext.timeEpoch`; 0 without
    it, or for an event far older than any request API Gateway still waits on), and how long the
    function may still run (the Lambda context; None without one)."""
    waited = 0.0
    epoch_ms = (router.current_event.raw_event.get("requestContext") or {}).get("timeEpoch")
    if isinstance(epoch_ms, (int, float)) and not isinstance(epoch_ms, bool):
        waited = max(0.0, time.time() - epoch_ms / 1000)
        waited = 0.0 if waited > _REPLAYED_S else waited
    context = getattr(router, "lambda_context", None)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return waited, (remaining() / 1000 if callable(remaining) else None)


def idempotency_key(router: Router | APIGatewayHttpResolver) -> str | None:
    """The request's `Idempotency-Key` header (an id: 1-64 of letters, digits, `_`, `-`), or None."""
    headers = {k.lower(): v for k, v in (router.current_event.headers or {}).items()}
    value = headers.get("idempotency-key")
    return None if value is None else check_id("Idempotency-Key", value)


# Methods that read: a key without the `write` scope may call these only.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Principal:
    """Who calls: the subject, and whether by a sign-in token (`jwt`) or an API key (`key`, with
    the key's scopes)."""

    sub: str
    via: str
    scopes: frozenset[str]
    key_id: str = ""  # the API key's id (via key)
    name: str | None = None  # a sign-in token's `name` claim

    @property
    def tenant(self) -> str:
        return tenant_key(self.sub)

    def may_write(self) -> bool:
        return self.via != "key" or "write" in self.scopes


def _authorizer_context(event: BaseProxyEvent) -> dict[str, object]:
    """The Lambda authorizer's context (`requestContext.authorizer.lambda`); an event from a JWT
    authorizer (`authorizer.jwt.claims`: sample events, tests of the handlers alone) is read as a
    sign-in token's claims."""
    authorizer = (event.raw_event.get("requestContext") or {}).get("authorizer") or {}
    if isinstance(authorizer.get("lambda"), dict):
        return dict(authorizer["lambda"])
    claims = (authorizer.get("jwt") or {}).get("claims") if isinstance(authorizer.get("jwt"), dict) else None
    return {**claims, "via": "jwt"} if isinstance(claims, dict) else {}


def caller(request: Request, deps: Deps) -> Principal:
    """The caller the authorizer let in: `sub`, and `via` key (its scopes) or jwt (the token's
    scopes, checked here against REQUIRED_SCOPES before any route reads or writes). Resolved once
    per request, however many of a route's dependencies need it."""
    return principal_of(deps, _authorizer_context(request.resolved_event))


Caller = Annotated[Principal, Depends(caller)]


def principal_of(deps: Stores, context: Mapping[str, object], *, checked_now: bool = False) -> Principal:
    """The caller an authorizer's context describes (API Gateway's, possibly cached for a minute;
    or, `checked_now`, one the request's own authorization has just read, as /mcp's does)."""
    sub = context.get("sub")
    if not sub or not isinstance(sub, str):
        raise Unauthorized("a bearer token with a subject is required", code="unauthorized")
    if context.get("via") == "key":
        key_id, scope = str(context.get("keyId") or ""), str(context.get("scope") or "")
        return _live_key(deps, sub, key_id, scope, read=not checked_now)
    quotas.require_credential(None)
    granted = _granted_scopes(dict(context))
    required = deps.settings.required_scopes.split()
    # The authorizer is shared by every route and cannot know the route's needs, so the check is
    # here (with SAM's JWT authorizer it was here too: SAM wants a literal list of scopes).
    missing = [scope for scope in required if scope not in granted]
    if missing:
        raise Forbidden(f"the access token lacks the scope {missing[0]!r} this API requires", code="insufficient_scope")
    name = context.get("name")
    return Principal(sub, "jwt", frozenset(granted), name=name if isinstance(name, str) and name else None)


def _live_key(deps: Stores, sub: str, key_id: str, scope: str, *, read: bool = True) -> Principal:
    """A key caller, if the key still works now (MX6). API Gateway keeps the authorizer's answer
    for ReauthorizeEvery (60 s), which must not outlive a revocation, an expiry or the account's
    deletion: each request made with a key reads the key's row (one consistent GetItem), and its
    creates commit only while that row exists (aws.quotas.require_credential)."""
    who = Principal(sub, "key", frozenset(scope.split()), key_id)
    if not key_id or (read and not deps.api_keys.alive(who.tenant, key_id, int(time.time()))):
        raise quotas.key_revoked()
    quotas.require_credential((keys.tenant_pk(who.tenant), keys.api_key_sk(key_id)))
    return who


def tenant(request: Request, who: Caller) -> str:
    """The caller's tenant. A request that writes (by its method) with a key that lacks the
    `write` scope is a 403 `insufficient_scope`."""
    if request.method not in READ_METHODS and not who.may_write():
        raise Forbidden("this API key is read-only; this request writes", code="insufficient_scope")
    return who.tenant


Tenant = Annotated[str, Depends(tenant)]


def signed_in(who: Caller) -> Principal:
    """The caller, who must have come with a sign-in token: API keys are managed only that way,
    so a leaked key cannot mint or revoke keys."""
    if who.via != "jwt":
        raise Forbidden("API keys are managed with a sign-in token, not with an API key", code="key_not_allowed")
    return who


SignedIn = Annotated[Principal, Depends(signed_in)]


def _error_reply(err: EngramError) -> Reply:
    """A domain error as its answer: the status it carries, the body every surface gives."""
    return envelope(err.status, error=error_body(err))


def _validation_response(errors: Sequence[Mapping[str, object]]) -> Reply:
    return _error_reply(invalid_input(errors))


def credential_per_request(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Reply:
    """The key whose row a request's creates check (set by `principal`) is this request's only: a
    Lambda container runs its invocations one after another on one thread, and the next one (a
    webhook, a queued turn) must not check an earlier caller's key."""
    quotas.require_credential(None)
    try:
        return next_middleware(app)
    finally:
        quotas.require_credential(None)


def body_limit(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Reply:
    body = app.current_event.body or ""
    if body and app.current_event.http_method in ("POST", "PUT", "PATCH"):
        if len(body) > MAX_BODY_BYTES:
            return fail(413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes", field="body")
        if (content_type := _not_json(app)) is not None:
            return _unsupported(content_type)  # powertools parses form and multipart bodies; we take JSON only
    return next_middleware(app)


def _not_json(app: APIGatewayHttpResolver) -> str | None:
    """The request's content type when it has a body that is not JSON (else None)."""
    content_type = str(app.current_event.headers.get("content-type") or "application/json").strip().lower()
    return content_type if app.current_event.body and not content_type.startswith("application/json") else None


def _unsupported(content_type: str) -> Reply:
    return fail(415, "unsupported_media_type", f"request bodies are application/json, not {content_type}", field="content-type")


def cors_of(origins: str) -> CORSConfig | None:
    """CORS for the other browser origins allowed to call the API (CORS_ALLOW_ORIGINS, from the
    template's CorsAllowOrigins); None, no CORS at all, when there are none: the console is served
    from the API's own origin. Powertools answers the preflight (the API routes `OPTIONS /{proxy+}`
    to the api function without auth) and puts the headers on answers to an allowed Origin only."""
    allowed = [origin.strip() for origin in origins.split(",") if origin.strip()]
    if not allowed:
        return None
    return CORSConfig(
        allow_origin=allowed[0],
        extra_origins=allowed[1:],
        allow_headers=["x-engram-timestamp", "x-engram-signature"],
        max_age=600,
    )


def build_app(*routers: Router | RouterSpec, cors: CORSConfig | None = None) -> Resolver:
    """The resolver over `routers`: a Router is included now, a RouterSpec with the first request
    one of its prefixes claims (`include_all` includes the rest)."""
    app = Resolver(cors, parse_body, [spec for spec in routers if isinstance(spec, RouterSpec)])
    app.use(middlewares=[credential_per_request, body_limit])
    _map_body_errors(app)

    @app.exception_handler(EngramError)
    def _domain(err: EngramError) -> Reply:
        if err.status >= 500:
            logger.warning("request failed", extra={"code": err.code, "error": err.message})
        return _error_reply(err)

    @app.exception_handler(ValidationError)
    def _invalid_model(err: ValidationError) -> Reply:
        return _validation_response([dict(e) for e in err.errors()])

    @app.not_found
    def _no_route(_err: NotFoundError) -> Reply:
        # API Gateway matched one of our routes, but powertools' own matching takes only some
        # characters in a path parameter (`café x` yes; `"`, `∰` or a control character no): such
        # an id is not one of ours, the same 400 as the route's own check gives.
        for name, value in (app.current_event.path_parameters or {}).items():
            if name == "proxy":  # OPTIONS /{proxy+} (CORS preflights): a path, not an id
                continue
            try:
                check_id(name, value)
            except BadRequest as err:
                return _error_reply(err)
        return fail(404, "route_not_found", f"no route {app.current_event.http_method} {app.current_event.path}")

    @app.exception_handler(Exception)
    def _unexpected(err: Exception) -> Reply:
        if (content_type := _not_json(app)) is not None:
            return _unsupported(content_type)  # powertools failed to parse a form or multipart body
        if aws_unavailable(err):
            logger.warning("an AWS service did not answer", extra={"error": repr(err)})
            return fail(StorageUnavailable.status, StorageUnavailable.code, StorageUnavailable.default_message)
        logger.exception("unhandled error")
        return fail(500, "internal_error", "an unexpected error occurred; it has been logged")

    for router in routers:
        if isinstance(router, Router):
            app.include_router(router)
    return app


def _map_body_errors(app: APIGatewayHttpResolver) -> None:
    """What powertools raises while it reads a request body, as the 4xx that names the problem."""

    @app.exception_handler(RequestValidationError)
    def _invalid(err: RequestValidationError) -> Reply:
        if (content_type := _not_json(app)) is not None:  # a form body powertools parsed: still not JSON
            return _unsupported(content_type)
        # Validation runs before any middleware, so an oversize body is recognised here.
        if len(app.current_event.body or "") > MAX_BODY_BYTES:
            return fail(413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes", field="body")
        return _validation_response(list(err.errors()))

    @app.exception_handler(json.JSONDecodeError)
    def _bad_json(_err: json.JSONDecodeError) -> Reply:
        return _error_reply(not_json())

    @app.exception_handler(UnicodeDecodeError)
    def _not_utf8(_err: UnicodeDecodeError) -> Reply:  # a base64-encoded body that is not UTF-8
        return fail(400, "invalid_body", "the request body is not valid UTF-8", field="body")

    @app.exception_handler(RequestUnsupportedContentType)
    def _wrong_type(_err: RequestUnsupportedContentType) -> Reply:
        return _unsupported(str(app.current_event.headers.get("content-type") or ""))
