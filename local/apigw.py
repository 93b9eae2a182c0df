"""An API Gateway HTTP API in miniature: routing, the JWT authorizer, payload v2.0 events, responses.

The handlers cannot tell the difference: they get the same event shape (version 2.0, routeKey,
rawPath, cookies, lower-cased headers, pathParameters, requestContext.authorizer.jwt.claims...)
and a Lambda context object, and their v2 responses are turned back into HTTP like the real
service does.

Auth: every route not marked `Auth: {Authorizer: NONE}` in template.yaml needs a bearer token.
`Authorization: Bearer dev-<user>` from a loopback address stands for a sign-in token: the
handler sees the authorizer context `{"sub": <user>, "via": "jwt", "scope": ..., ...}`. Any other
bearer token (an Engram API key) goes to the template's Lambda authorizer function, called as API
Gateway calls it (a REQUEST event, payload 2.0, simple responses), and what it lets in is cached
by the Authorization header for its `ReauthorizeEvery` seconds. A refusal is the real service's
`401 {"message":"Unauthorized"}` (`isAuthorized: false`: 403 `Forbidden`).

DNS rebinding: the local stack answers only requests whose `Host` is a loopback name (localhost,
*.localhost, 127.x.x.x, [::1]); any other is 421. A page whose name was made to point at
127.0.0.1 sends its own name as `Host`, so it cannot read /api or /mcp (where `dev-<user>`, an
easily guessed token, would let it in). In AWS the API's own name routes the request.
"""

from __future__ import annotations

import base64
import importlib.util
import ipaddress
import itertools
import json
import logging
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from .resources import ACCOUNT_ID, Resolver, Unresolvable
from .template import FunctionSpec, HttpRoute, Template

log = logging.getLogger("local")

LOCAL_ISSUER = "engram-local"
# What a Cognito access token carries (the created pool's scope: template.yaml REQUIRED_SCOPES).
LOCAL_SCOPE = "aws.cognito.signin.user.admin"
API_ID = "enlocal001"
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API's request payload limit
# The API Gateway integration timeout; past it the real service answers 503 whatever the function does.
INTEGRATION_TIMEOUT_S = 30

# What `authorize` returns when the Lambda authorizer answered `isAuthorized: false` (403).
NOT_AUTHORIZED: dict[str, str] = {"": ""}
_BEARER = re.compile(r"^Bearer dev-([A-Za-z0-9_-]{1,64})$", re.IGNORECASE)
_TEXT_TYPES = {"application/json", "application/javascript", "application/xml", "application/graphql"}

Headers = list[tuple[str, str]]
_LOADS = itertools.count(1)


# --------------------------------------------------------------------------- Lambda runtime
class LambdaContext:
    """What the Python runtime passes as `context` (memory_limit_in_mb is a str there too)."""

    def __init__(self, function_name: str, timeout_s: int, memory_mb: int, region: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{function_name}"
        self.memory_limit_in_mb = str(memory_mb)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class _Environment:
    """One execution environment: the handler's module imported under a name of its own, so its
    globals (powertools' resolver with its current event and context, the logger's keys, the
    function's composition root) are this environment's alone, as in Lambda."""

    def __init__(self, module_name: str, module: ModuleType, handler: Callable[[Any, Any], Any]) -> None:
        self.module_name, self.module, self.handler = module_name, module, handler


class LoadedFunction:
    """A function of the template whose handler is imported from its CodeUri on first use (a cold
    start). Like Lambda, it serves concurrent invocations from separate execution environments:
    an environment takes one event at a time, and a second concurrent event gets an idle one or a
    new one (another cold start), up to MAX_ENVIRONMENTS. So a three-minute turn in the chat
    function's worker does not hold up a socket opening or a sync turn beside it. The core's HTTP
    routers, module singletons shared by the environments in this one process, read the resolver
    of the invocation they serve (engram.api.http), so HTTP events run side by side too."""

    MAX_ENVIRONMENTS = 10  # Lambda's would be the account's concurrency; past this, events wait

    def __init__(self, spec: FunctionSpec, root: Path, *, prefix: str, region: str) -> None:
        self.spec = spec
        self.code_dir = (root / spec.code_uri).resolve()
        self.function_name = f"{prefix}-{spec.logical_id}"
        self.region = region
        module_path, _, self.handler_name = spec.handler.rpartition(".")
        self.module_file = self.code_dir / (module_path.replace(".", "/") + ".py")
        # Every function has an app.py: a name per function and per environment keeps them apart.
        self._module_stem = f"{spec.logical_id}_{module_path.replace('.', '_')}"
        self._environments: list[_Environment] = []
        self._idle: list[_Environment] = []
        self._loading = 0  # environments being imported (counted against the cap)
        self._setup: Callable[[ModuleType], None] | None = None
        self._free = threading.Condition()

    def prepare(self, setup: Callable[[ModuleType], None] | None) -> None:
        """Run `setup` on every environment's module, those loaded and those loaded later (the
        tests give every environment their dependencies this way); None stops doing so."""
        with self._free:
            self._setup = setup
            loaded = list(self._environments)
        for environment in loaded:
            if setup is not None:
                setup(environment.module)

    def handler(self) -> Callable[[Any, Any], Any]:
        """The first environment's handler (loading it): to reach a handler's module globals."""
        return self._first().handler

    def module(self) -> ModuleType:
        """The first environment's module (imported on first use), e.g. to reach its composition root."""
        return self._first().module

    def environments(self) -> int:
        with self._free:
            return len(self._environments)

    def _first(self) -> _Environment:
        with self._free:
            if self._environments:
                return self._environments[0]
        environment = self._take()
        self._give_back(environment)
        return environment

    def _take(self) -> _Environment:
        with self._free:
            while not self._idle and len(self._environments) + self._loading >= self.MAX_ENVIRONMENTS:
                self._free.wait()
            if self._idle:
                return self._idle.pop()
            self._loading += 1
        try:
            environment = self._load()
        finally:
            with self._free:
                self._loading -= 1
                self._free.notify()
        with self._free:
            self._environments.append(environment)
            setup = self._setup
        if setup is not None:
            setup(environment.module)
        return environment

    def _give_back(self, environment: _Environment) -> None:
        with self._free:
            if environment in self._environments:  # not unloaded meanwhile
                self._idle.append(environment)
            self._free.notify()

    def _load(self) -> _Environment:
        module_name = f"_engram_local{next(_LOADS)}_{self._module_stem}"
        spec = importlib.util.spec_from_file_location(module_name, self.module_file)
        if spec is None or spec.loader is None:
            raise ImportError(f"{self.spec.logical_id}: cannot load {self.module_file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return _Environment(module_name, module, getattr(module, self.handler_name))

    def unload(self) -> None:
        with self._free:
            gone, self._environments, self._idle = self._environments, [], []
        for environment in gone:
            sys.modules.pop(environment.module_name, None)

    def context(self) -> LambdaContext:
        return LambdaContext(self.function_name, self.spec.timeout, self.spec.memory_size, self.region)

    def invoke(self, event: Any) -> Any:
        """Call the handler as Lambda would, in an execution environment of its own for the call."""
        environment = self._take()
        try:
            context = self.context()  # its deadline starts when the environment takes the event
            started = time.monotonic()
            try:
                return environment.handler(event, context)
            finally:
                self._report_overrun(time.monotonic() - started)
        finally:
            self._give_back(environment)

    def _report_overrun(self, elapsed: float) -> None:
        # A thread cannot be killed, so the local stack only reports what Lambda would have cut off.
        if elapsed > self.spec.timeout:
            log.warning(
                "%s ran %.1f s, over its %d s Timeout: Lambda would have killed it",
                self.function_name,
                elapsed,
                self.spec.timeout,
            )


# --------------------------------------------------------------------------- routing
@dataclass(frozen=True)
class _CompiledRoute:
    route: HttpRoute
    pattern: re.Pattern[str]
    rank: tuple[int, ...]  # per segment: literal 0 < {param} 1 < {greedy+} 2; lower is more specific


def _compile(route: HttpRoute) -> _CompiledRoute:
    if route.path == "$default":
        return _CompiledRoute(route, re.compile(r".*", re.S), (3,))
    parts, rank = [], []
    for segment in route.path.strip("/").split("/"):
        if segment.startswith("{") and segment.endswith("+}"):
            parts.append(f"(?P<{segment[1:-2]}>.+)")
            rank.append(2)
        elif segment.startswith("{") and segment.endswith("}"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")  # a parameter never spans a `/`
            rank.append(1)
        else:
            parts.append(re.escape(segment))
            rank.append(0)
    return _CompiledRoute(route, re.compile("^/" + "/".join(parts) + "$", re.S), tuple(rank))


@dataclass
class Functions:
    """The template's functions, loaded from `root`, and the HTTP routes that reach them."""

    template: Template
    root: Path
    by_id: dict[str, LoadedFunction]
    region: str = "us-east-1"
    _routes: list[_CompiledRoute] = field(default_factory=list)
    _cors: dict[str, Any] | None = None
    # The Lambda authorizer (its function and cache TTL), and what it let in: header -> (until, context).
    authorizer_id: str | None = None
    authorizer_ttl: int = 0
    clock: Callable[[], float] = time.monotonic
    _auth_cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._routes = [_compile(r) for spec in self.template.functions() for r in spec.routes]
        self._cors = self._read_cors()
        self.authorizer_id, self.authorizer_ttl = self._read_authorizer()

    def _read_authorizer(self) -> tuple[str | None, int]:
        for res in self.template.resources_of_type("AWS::Serverless::HttpApi").values():
            auth = res.get("Properties", {}).get("Auth") or {}
            config = (auth.get("Authorizers") or {}).get(auth.get("DefaultAuthorizer") or "") or {}
            arn = config.get("FunctionArn")
            if isinstance(arn, dict) and "Fn::GetAtt" in arn:
                target = arn["Fn::GetAtt"]
                logical_id = target[0] if isinstance(target, list) else str(target).split(".")[0]
                return logical_id, int((config.get("Identity") or {}).get("ReauthorizeEvery", 300))
        return None, 0

    def lambda_authorizer(self, event: dict[str, Any], header: str) -> dict[str, Any] | None:
        """The context the template's authorizer function gives the request (cached by `header`
        for its TTL), None when it refuses: raises (401 "Unauthorized") or answers not authorized."""
        if self.authorizer_id is None:
            return None
        now = self.clock()
        cached = self._auth_cache.get(header)
        if cached and cached[0] > now:
            return cached[1]
        try:
            answer = self.by_id[self.authorizer_id].invoke(event)
        except Exception as err:  # the function's refusal ("Unauthorized") or its failure
            log.info("the authorizer refused a request: %s", err)
            return None
        if not (isinstance(answer, dict) and answer.get("isAuthorized") is True):
            return {}
        context = dict(answer.get("context") or {})
        if self.authorizer_ttl > 0:
            self._auth_cache[header] = (now + self.authorizer_ttl, context)
        return context

    def __iter__(self) -> Iterator[LoadedFunction]:
        return iter(self.by_id.values())

    def __getitem__(self, logical_id: str) -> LoadedFunction:
        return self.by_id[logical_id]

    @property
    def routes(self) -> list[HttpRoute]:
        return [c.route for c in self._routes]

    def match(self, method: str, path: str) -> tuple[HttpRoute, dict[str, str]] | None:
        """The most specific route for a decoded path, as API Gateway picks it."""
        candidates = []
        for compiled in self._routes:
            if compiled.route.method not in (method, "ANY") and compiled.route.path != "$default":
                continue
            found = compiled.pattern.match(path)
            if found:
                candidates.append((compiled.rank, compiled.route.method == "ANY", compiled.route, found.groupdict()))
        if not candidates:
            return None
        _, _, route, params = min(candidates, key=lambda c: (c[0], c[1]))
        return route, params

    def cors(self) -> dict[str, Any] | None:
        """The HttpApi's CorsConfiguration with parameter defaults filled in."""
        return self._cors

    def _read_cors(self) -> dict[str, Any] | None:
        for res in self.template.resources_of_type("AWS::Serverless::HttpApi").values():
            config = res.get("Properties", {}).get("CorsConfiguration")
            if config:
                try:
                    return Resolver(self.template, {}, region=self.region).resolve(config)
                except Unresolvable:
                    return None
        return None

    def preload(self) -> None:
        """Import every handler now, so a broken import shows at start rather than on the first request."""
        for fn in self:
            fn.handler()

    def unload(self) -> None:
        for fn in self:
            fn.unload()


def load_functions(template: Template, root: str | Path, *, prefix: str = "engram-local", region: str = "us-east-1") -> Functions:
    """Handlers are `<root>/<CodeUri>/<module>.py:<attr>` per the template's Handler; imported lazily."""
    root = Path(root)
    by_id = {spec.logical_id: LoadedFunction(spec, root, prefix=prefix, region=region) for spec in template.functions()}
    return Functions(template=template, root=root, by_id=by_id, region=region)


# --------------------------------------------------------------------------- authorizer
def authorize(
    route: HttpRoute,
    headers: Mapping[str, str],
    source_ip: str,
    *,
    functions: Functions | None = None,
    event: dict[str, Any] | None = None,
) -> dict[str, str] | None:
    """The authorizer context of an authorized request, None when it must be refused with 401
    (routes with Auth NONE get {}; a Lambda authorizer's `isAuthorized: false` gives
    NOT_AUTHORIZED: 403). `dev-<user>` stands for a sign-in token; other tokens go to the template's authorizer
    function (with `functions` and the request's `event`)."""
    if route.auth_none:
        return {}
    try:
        loopback = ipaddress.ip_address(source_ip).is_loopback
    except ValueError:
        loopback = False
    header = headers.get("authorization", "").strip()
    found = _BEARER.match(header)
    if found:
        if not loopback:
            return None
        return {"sub": found.group(1), "via": "jwt", "iss": LOCAL_ISSUER, "token_use": "access", "scope": LOCAL_SCOPE}
    if functions is None or event is None or not header:
        return None
    request = {**event, "type": "REQUEST", "identitySource": [header], "routeArn": _route_arn(event)}
    context = functions.lambda_authorizer(request, header)
    if context == {}:
        return NOT_AUTHORIZED
    return None if context is None else {str(k): str(v) for k, v in context.items()}


def _route_arn(event: dict[str, Any]) -> str:
    method, _, path = str(event.get("routeKey", "")).partition(" ")
    return f"arn:aws:execute-api:us-east-1:{ACCOUNT_ID}:{API_ID}/$default/{method}{path}"


# --------------------------------------------------------------------------- events
def _is_text(content_type: str) -> bool:
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def _fold_headers(headers: Iterable[tuple[str, str]] | Mapping[str, str] | None) -> tuple[dict[str, str], list[str]]:
    """API Gateway's view: lower-case names, repeated headers joined by commas, cookies split out."""
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or [])
    folded: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in pairs:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in str(value).split(";") if c.strip())
            continue
        folded[key] = f"{folded[key]},{value}" if key in folded else str(value)
    return folded, cookies


def build_http_event(
    route_key: str,
    method: str,
    path: str,
    *,
    raw_query: str = "",
    headers: Iterable[tuple[str, str]] | Mapping[str, str] | None = None,
    body: bytes | None = None,
    path_params: Mapping[str, str] | None = None,
    claims: Mapping[str, str] | None = None,
    source_ip: str = "127.0.0.1",
    request_id: str | None = None,
    now: datetime | None = None,
    api_id: str = API_ID,
) -> dict[str, Any]:
    """An HTTP API payload v2.0 event. `path` is the decoded path (HTTP APIs deliver rawPath decoded);
    `claims` None means the route has no authorizer (the event then has no `authorizer`)."""
    now = now or datetime.now(UTC)
    folded, cookies = _fold_headers(headers)
    domain = folded.get("host", f"{api_id}.execute-api.us-east-1.amazonaws.com").rsplit(":", 1)[0]
    request_context: dict[str, Any] = {
        "accountId": ACCOUNT_ID,
        "apiId": api_id,
        "domainName": domain,
        "domainPrefix": domain.split(".", 1)[0],
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": folded.get("user-agent", ""),
        },
        "requestId": request_id or str(uuid.uuid4()),
        "routeKey": route_key,
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if claims is not None:
        # A Lambda authorizer's context, as payload 2.0 carries it.
        request_context["authorizer"] = {"lambda": dict(claims)}
    event: dict[str, Any] = {"version": "2.0", "routeKey": route_key, "rawPath": path, "rawQueryString": raw_query}
    if cookies:
        event["cookies"] = cookies
    event["headers"] = folded
    if raw_query:
        params: dict[str, str] = {}
        for key, value in parse_qsl(raw_query, keep_blank_values=True):
            params[key] = f"{params[key]},{value}" if key in params else value
        event["queryStringParameters"] = params
    event["requestContext"] = request_context
    if path_params:
        event["pathParameters"] = dict(path_params)
    if body:
        if _is_text(folded.get("content-type", "")):
            try:
                event["body"], event["isBase64Encoded"] = body.decode("utf-8"), False
            except UnicodeDecodeError:
                event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
        else:
            # HTTP APIs hand non-text content types (form posts, octet streams, none) over base64-encoded.
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    else:
        event["isBase64Encoded"] = False
    return event


# --------------------------------------------------------------------------- request / response
@dataclass
class HttpRequest:
    method: str
    target: str  # the request line's target: /path?query, still percent-encoded
    headers: Headers
    body: bytes = b""
    source_ip: str = "127.0.0.1"


@dataclass
class HttpResponse:
    status: int
    headers: Headers
    body: bytes

    def header_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in self.headers:
            key = name.lower()
            out[key] = f"{out[key]}, {value}" if key in out else value
        return out


def _message(status: int, message: str, extra: Headers | None = None) -> HttpResponse:
    body = json.dumps({"message": message}).encode()
    return HttpResponse(status, [("content-type", "application/json"), *(extra or [])], body)


def lambda_to_http(result: Any) -> HttpResponse:
    """A payload v2.0 response (or the simple format: any JSON value) as API Gateway returns it."""
    if isinstance(result, dict) and "statusCode" in result:
        try:
            status = int(result["statusCode"])
            headers: Headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
            headers += [("set-cookie", str(c)) for c in result.get("cookies") or []]
            raw = result.get("body")
            if raw is None:
                body = b""
            elif result.get("isBase64Encoded"):
                body = base64.b64decode(raw)
            else:
                body = str(raw).encode("utf-8")
        except (TypeError, ValueError, AttributeError):
            log.error("malformed Lambda response: %r", result)
            return _message(500, "Internal Server Error")
        return HttpResponse(status, headers, body)
    text = result if isinstance(result, str) else json.dumps(result)
    return HttpResponse(200, [("content-type", "application/json")], text.encode("utf-8"))


def _split_target(target: str) -> tuple[str, str]:
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    raw_path, _, raw_query = target.partition("?")
    return raw_path or "/", raw_query


def _cors_headers(cors: Mapping[str, Any], origin: str) -> Headers:
    allowed = [str(o) for o in cors.get("AllowOrigins") or []]
    if not origin or not ("*" in allowed or origin in allowed):
        return []
    out: Headers = [("access-control-allow-origin", "*" if "*" in allowed and not cors.get("AllowCredentials") else origin)]
    if cors.get("AllowCredentials"):
        out.append(("access-control-allow-credentials", "true"))
    if cors.get("ExposeHeaders"):
        out.append(("access-control-expose-headers", ",".join(cors["ExposeHeaders"])))
    return out


MISDIRECTED = "Misdirected Request: the local stack answers only a loopback Host (localhost, 127.0.0.1)"


def loopback_host(host: str) -> bool:
    """Whether a `Host` header names this machine: localhost, *.localhost (RFC 6761), a loopback
    address; with or without a port."""
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:3000
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def dispatch(functions: Functions, request: HttpRequest) -> HttpResponse:
    """Route, authorize, build the event, call the handler, and answer like API Gateway."""
    if len(request.body) > MAX_PAYLOAD_BYTES:
        return _message(413, "Request Entity Too Large")
    raw_path, raw_query = _split_target(request.target)
    # HTTP APIs decode the path before routing and cut it at a decoded `?`.
    path = unquote(raw_path).split("?", 1)[0]
    method = request.method.upper()
    folded, _ = _fold_headers(request.headers)
    if not loopback_host(folded.get("host", "")):
        return _message(421, MISDIRECTED)
    cors = functions.cors()

    matched = functions.match(method, path)
    if matched is None and method == "OPTIONS" and cors and "access-control-request-method" in folded:
        preflight = _cors_headers(cors, folded.get("origin", ""))
        if preflight:
            preflight += [
                ("access-control-allow-methods", ",".join(cors.get("AllowMethods") or ["*"])),
                ("access-control-allow-headers", ",".join(cors.get("AllowHeaders") or ["*"])),
            ]
            if cors.get("MaxAge") is not None:
                preflight.append(("access-control-max-age", str(cors["MaxAge"])))
        return HttpResponse(204, preflight, b"")
    if matched is None:
        return _message(404, "Not Found")
    route, params = matched

    headers = list(request.headers)
    trace_id = f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}"
    forwarded_for = f"{folded['x-forwarded-for']}, {request.source_ip}" if "x-forwarded-for" in folded else request.source_ip
    headers = [(n, v) for n, v in headers if n.lower() not in ("x-forwarded-for", "x-amzn-trace-id")]
    headers += [("x-forwarded-for", forwarded_for), ("x-forwarded-proto", "http"), ("x-amzn-trace-id", trace_id)]
    if request.body and "content-length" not in folded:
        headers.append(("content-length", str(len(request.body))))

    def event_with(claims: Mapping[str, str] | None) -> dict[str, Any]:
        return build_http_event(
            route.route_key,
            method,
            path,
            raw_query=raw_query,
            headers=headers,
            body=request.body or None,
            path_params={k: v for k, v in params.items()} if params else None,
            claims=claims,
            source_ip=request.source_ip,
        )

    claims = authorize(route, folded, request.source_ip, functions=functions, event=event_with(None))
    if claims is None:
        return _message(401, "Unauthorized", [("www-authenticate", "Bearer")])
    if claims is NOT_AUTHORIZED:
        return _message(403, "Forbidden")
    event = event_with(None if route.auth_none else claims)
    function = functions[route.function_id]
    started = time.monotonic()
    try:
        result = function.invoke(event)
    except Exception:
        log.error("%s raised on %s:\n%s", function.function_name, route.route_key, traceback.format_exc())
        return _message(500, "Internal Server Error")
    if time.monotonic() - started > INTEGRATION_TIMEOUT_S:
        log.warning(
            "%s answered after API Gateway's %d s integration timeout (clients would get a 503)",
            route.route_key,
            INTEGRATION_TIMEOUT_S,
        )
    response = lambda_to_http(result)
    if cors:
        response.headers += _cors_headers(cors, folded.get("origin", ""))
    return response


def invoke_http(
    functions: Functions,
    method: str,
    path: str,
    *,
    body: bytes | str | dict[str, Any] | list[Any] | None = None,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    query: Mapping[str, Any] | str | None = None,
    user: str | None = None,
    source_ip: str = "127.0.0.1",
) -> tuple[int, dict[str, str], bytes]:
    """One request through the emulated API without a socket: `user` adds `Bearer dev-<user>`;
    a dict/list body is sent as JSON. Returns (status, lower-cased headers, body bytes)."""
    pairs: Headers = list(headers.items() if isinstance(headers, Mapping) else (headers or []))
    names = {n.lower() for n, _ in pairs}
    raw: bytes
    if body is None:
        raw = b""
    elif isinstance(body, bytes):
        raw = body
    elif isinstance(body, str):
        raw = body.encode("utf-8")
    else:
        raw = json.dumps(body).encode("utf-8")
        if "content-type" not in names:
            pairs.append(("content-type", "application/json"))
    if user is not None and "authorization" not in names:
        pairs.append(("authorization", f"Bearer dev-{user}"))
    if "host" not in names:
        pairs.append(("host", "localhost"))
    if "user-agent" not in names:
        pairs.append(("user-agent", "engram-local/invoke_http"))
    target = path
    if query:
        encoded = query if isinstance(query, str) else urlencode(query, doseq=True, quote_via=quote)
        target = f"{path}{'&' if '?' in path else '?'}{encoded}"
    response = dispatch(functions, HttpRequest(method.upper(), target, pairs, raw, source_ip))
    return response.status, response.header_dict(), response.body
