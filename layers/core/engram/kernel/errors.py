"""Domain errors, and the one error language of every surface: `error_body` words an error as
`{code, message, field?, details?, runId?}` for the HTTP API (engram.api.http, which adds the
status), the WebSocket's error frames, the MCP server's tool errors and the webhook; pydantic's
validation errors become that body through `invalid_input`, in words for a person."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class EngramError(Exception):
    status = 500
    code = "internal_error"
    run_id: str | None = None  # the run that records the failure (failed turns, unqueued runs)
    details: tuple[dict[str, str], ...] = ()  # every broken rule of a validation error
    # More of the error's words, by name, in its body and in a run record (a limit_exceeded's `limit`).
    context: Mapping[str, object] = {}

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code


# AWS error codes that mean "not now" rather than "not allowed" (throttling, service-side faults).
_UNAVAILABLE_CODES = frozenset(
    {
        "ServiceUnavailable",
        "InternalServerError",
        "InternalError",
        "InternalFailure",
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "RequestTimeout",
        "TransactionInProgressException",
    }
)


def aws_unavailable(err: BaseException) -> bool:
    """An AWS service did not answer, or answered "not now": connection failures and timeouts,
    5xx and throttling. Recognised by the botocore types' module, so the kernel imports no SDK."""
    if not type(err).__module__.startswith(("botocore", "urllib3")):
        return False
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return True  # EndpointConnectionError, ReadTimeoutError, ConnectTimeoutError, ...
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return status >= 500 or response.get("Error", {}).get("Code") in _UNAVAILABLE_CODES


def error_of(err: BaseException) -> dict[str, object]:
    """The `{code, message}` a run record (and a client) gets for a failure: ours as raised; an AWS
    outage as `storage_unavailable`; anything else as `internal_error`. Never the exception's own
    text, which in AWS carries ARNs, account ids and endpoints: that goes to the logs."""
    if isinstance(err, EngramError):
        return {"code": err.code, "message": err.message, **err.context}
    if aws_unavailable(err):
        return {"code": StorageUnavailable.code, "message": StorageUnavailable.default_message}
    return {"code": "internal_error", "message": "the run failed unexpectedly; the details are logged under its run id"}


def domain_error(type_name: str) -> bool:
    """Whether an error's class name (how Lambda reports an unhandled error) is one of ours, whose
    message is written for clients."""
    pending, names = [EngramError], set()
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending += cls.__subclasses__()
    return type_name in names


class BadRequest(EngramError):
    status = 400
    code = "bad_request"


class BadBody(BadRequest):
    """The body (or frame) as a whole is not what every body is: one JSON object, UTF-8."""

    code = "invalid_body"


def not_json(what: str = "the request body") -> BadBody:
    return BadBody(f"{what} is not valid JSON", field="body")


class InvalidInput(BadRequest):
    """Input that broke a rule of its model: the first broken rule in words, every one in `details`."""

    code = "validation_error"

    def __init__(self, message: str, *, field: str | None, details: Sequence[dict[str, str]] = ()):
        super().__init__(message, field=field)
        self.details = tuple(details)


def error_body(err: EngramError) -> dict[str, object]:
    """The error as every surface words it: `{code, message, field?, details?, runId?}` (HTTP adds
    the status; the WebSocket, the MCP server and the webhook carry this same body)."""
    body: dict[str, object] = {"code": err.code, "message": err.message}
    if err.field:
        body["field"] = err.field
    if err.details:
        body["details"] = [dict(d) for d in err.details]
    if err.run_id:
        body["runId"] = err.run_id
    body.update(err.context)
    return body


def field_of(loc: Sequence[object]) -> str:
    """A validation error's location as the field a person sees (`memory.key`), without where in
    the request it was (`body`, `query`, `path`, `header`: the first part of a location the HTTP
    layer gives; a field of its own may have such a name, e.g. a search tool's `query`)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header") and (len(parts) > 1 or parts[0] == "body"):
        parts = parts[1:]
    return ".".join(parts)


# Fields whose pattern has a meaning a person knows better than the regular expression.
_PATTERN_WORDS = {
    "schedule": "must be rate(<number> minutes|hours|days) or cron(<six fields>), e.g. rate(1 hour) or cron(0 9 * * ? *)",
    "model": "may use only letters, digits and . _ : - (at most 100 characters)",
}


def _plural(n: object, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def rule_in_words(error: Mapping[str, object]) -> str:
    """One validation error as the rule it broke, in words for a person (the field is named by
    the caller): "must not be empty", "must be at most 100 characters", never a regular expression."""
    kind = str(error.get("type", ""))
    raw_ctx = error.get("ctx")
    ctx: Mapping[str, object] = raw_ctx if isinstance(raw_ctx, Mapping) else {}
    loc = error.get("loc", ())
    field = field_of(list(loc) if isinstance(loc, Sequence) else [])
    if kind == "string_too_short":
        n = ctx.get("min_length", 1)
        return "must not be empty" if n == 1 else f"must be at least {_plural(n, 'character')}"
    if kind == "string_too_long":
        return f"must be at most {_plural(ctx.get('max_length'), 'character')}"
    if kind == "string_pattern_mismatch":
        return _PATTERN_WORDS.get(field.split(".")[-1], "is not in the expected format")
    if kind == "too_short":
        return f"must have at least {_plural(ctx.get('min_length'), 'item')}"
    if kind == "too_long":
        return f"must have at most {_plural(ctx.get('max_length'), 'item')}"
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}  # fmt: skip
    if kind in bounds:
        words, key = bounds[kind]
        return f"must be {words} {ctx.get(key)}"
    simple = {
        "missing": "is required",
        "extra_forbidden": "is not a known field",
        "int_parsing": "must be a whole number", "int_type": "must be a whole number", "int_from_float": "must be a whole number",
        "float_parsing": "must be a number", "float_type": "must be a number",
        "bool_parsing": "must be true or false", "bool_type": "must be true or false",
        "string_type": "must be text", "dict_type": "must be a JSON object", "model_type": "must be a JSON object",
        "list_type": "must be a list", "none_required": "must be null",
    }  # fmt: skip
    if kind in simple:
        return simple[kind]
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', 'the allowed values')}"
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    return f"is not valid: {message}"


def invalid_input(errors: Sequence[Mapping[str, object]], *, what: str = "the request body") -> BadRequest:
    """pydantic's errors (`ValidationError.errors()`, or powertools' request validation) as the
    400 every surface gives: a body that is not a JSON object is `invalid_body` (`what` names the
    body: the request's, a socket's message); else `validation_error` naming the first field and
    the rule it broke in words, with every broken rule (at most 10) in `details`."""
    first: Mapping[str, object] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    loc = first.get("loc", ())
    field = field_of(list(loc) if isinstance(loc, Sequence) else [])
    kind = first.get("type", "")
    if kind == "json_invalid":
        return not_json(what)
    if not field and kind in ("model_attributes_type", "dict_type", "missing", "model_type"):
        return BadBody(f"{what} must be a JSON object", field="body")
    details = []
    for e in errors[:10]:
        e_loc = e.get("loc", ())
        details.append({"field": field_of(list(e_loc) if isinstance(e_loc, Sequence) else []), "message": rule_in_words(e)})
    return InvalidInput(f"{field or 'the request'} {rule_in_words(first)}", field=field or None, details=details)


class Unauthorized(EngramError):
    status = 401
    code = "unauthorized"


class Forbidden(EngramError):
    status = 403
    code = "forbidden"


class NotFound(EngramError):
    status = 404
    code = "not_found"


class Conflict(EngramError):
    status = 409
    code = "conflict"


class QuotaExceeded(Conflict):
    """A per-user quota is reached: nothing was stored; deleting something of the kind frees room."""

    code = "quota_exceeded"

    def __init__(
        self,
        resource: str,
        limit: int,
        *,
        per: str = "account",
        setting: str = "",
        remedy: str = "delete one to make room",
        field: str | None = None,
    ):
        hint = f" ({setting})" if setting else ""
        super().__init__(f"quota reached: at most {limit} {resource} per {per}{hint}; {remedy}", field=field or resource)
        self.limit = limit


class PayloadTooLarge(EngramError):
    status = 413
    code = "payload_too_large"


class SessionBusy(Conflict):
    code = "session_busy"


class TooManyTurns(EngramError):
    """The user has as many turns queued or running as they may (ST7): nothing was queued."""

    status = 429
    code = "too_many_turns"

    def __init__(self, limit: int):
        super().__init__(f"you have {limit} turns queued or running (MAX_ACTIVE_TURNS); send this one when one of them has ended")


class LimitExceeded(EngramError):
    """A spending limit (the agent's or the user's) is reached: the model was not called again.
    `context["limit"]` names it: `{name, scope, value, spentUsd?, resetsAt?}`. 402, not 429:
    clients and proxies send a 429 again by themselves, and this takes a person raising the
    limit, or its reset (the body says when)."""

    status = 402
    code = "limit_exceeded"

    def __init__(self, message: str, *, limit: Mapping[str, object]):
        super().__init__(message, field=f"limits.{limit['name']}")
        # the field too: a failed turn (TurnFailed) carries the context, not the field
        self.context = {"field": self.field, "limit": dict(limit)}


class StorageUnavailable(EngramError):
    """DynamoDB or S3 did not answer in time (or throttled us): nothing was changed; retry."""

    status = 503
    code = "storage_unavailable"
    default_message = "the service's storage did not answer in time; nothing was changed, retry shortly"


class OutcomeUnknown(EngramError):
    """A commit was sent and its answer lost, and reading it back failed too: it may have landed.
    The client gets the run id to look it up, never "nothing was changed"."""

    status = 503
    code = "outcome_unknown"

    def __init__(self, run_id: str | None = None, *, see: str | None = None, field: str = "runId"):
        super().__init__(f"outcome unknown, see {see or f'GET /api/runs/{run_id}'}", field=field)
        self.run_id = run_id


class QueueUnavailable(EngramError):
    """The job could not be queued; the run it would have been is recorded as failed."""

    status = 503
    code = "queue_unavailable"

    def __init__(self, message: str, *, run_id: str | None = None):
        super().__init__(message)
        self.run_id = run_id


class TurnFailed(EngramError):
    """A chat turn failed; history is untouched and the run is recorded as failed. `run_id` is
    None when even the failed run could not be recorded (no id is handed out that would 404)."""

    status = 502
    code = "turn_failed"

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None,
        code: str | None = None,
        status: int | None = None,
        context: Mapping[str, object] | None = None,
    ):
        super().__init__(message, code=code)
        self.run_id = run_id
        if status:
            self.status = status
        if context:
            self.context = dict(context)


class ProviderError(EngramError):
    status = 502
    code = "model_error"


class ModelNotConfigured(ProviderError):
    """The model provider cannot be used as deployed (no or a refused Anthropic key, no Bedrock
    model access): a setup step for the person who deployed the stack, named in the message."""

    status = 503
    code = "model_not_configured"


class TurnTimeout(EngramError):
    status = 504
    code = "turn_timeout"


class ToolCrashed(EngramError):
    status = 500
    code = "tool_failed"


class NoCard(EngramError):
    """A run whose purpose is its result card (a re-examination) ended without a valid one."""

    status = 502
    code = "no_card"
