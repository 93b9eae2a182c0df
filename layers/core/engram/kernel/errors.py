"""Domain errors. The HTTP layer maps them to status codes in one place (engram.api.http)."""

from __future__ import annotations


class EngramError(Exception):
    status = 500
    code = "internal_error"

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


def error_of(err: BaseException) -> dict[str, str]:
    """The `{code, message}` a run record (and a client) gets for a failure: ours as raised; an AWS
    outage as `storage_unavailable`; anything else as `internal_error`. Never the exception's own
    text, which in AWS carries ARNs, account ids and endpoints: that goes to the logs."""
    if isinstance(err, EngramError):
        return {"code": err.code, "message": err.message}
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


class StorageUnavailable(EngramError):
    """DynamoDB or S3 did not answer in time (or throttled us): nothing was changed; retry."""

    status = 503
    code = "storage_unavailable"
    default_message = "the service's storage did not answer in time; nothing was changed, retry shortly"


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

    def __init__(self, message: str, *, run_id: str | None, code: str | None = None, status: int | None = None):
        super().__init__(message, code=code)
        self.run_id = run_id
        if status:
            self.status = status


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
