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


def error_of(err: Exception) -> dict[str, str]:
    """The `{code, message}` a run record keeps for a failure: ours as raised, anything else as internal."""
    if isinstance(err, EngramError):
        return {"code": err.code, "message": err.message}
    return {"code": "internal_error", "message": f"{type(err).__name__}: {err}"}


class BadRequest(EngramError):
    status = 400
    code = "bad_request"


class Unauthorized(EngramError):
    status = 401
    code = "unauthorized"


class NotFound(EngramError):
    status = 404
    code = "not_found"


class Conflict(EngramError):
    status = 409
    code = "conflict"


class PayloadTooLarge(EngramError):
    status = 413
    code = "payload_too_large"


class SessionBusy(Conflict):
    code = "session_busy"


class TurnFailed(EngramError):
    """A chat turn failed; history is untouched and the run is recorded as failed."""

    status = 502
    code = "turn_failed"

    def __init__(self, message: str, *, run_id: str, code: str | None = None, status: int | None = None):
        super().__init__(message, code=code)
        self.run_id = run_id
        if status:
            self.status = status


class ProviderError(EngramError):
    status = 502
    code = "model_error"


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
