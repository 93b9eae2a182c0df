"""The API's error envelope as exceptions: `{success: false, error: {code, message, field?,
details?, runId?}}` becomes an `EngramError` subclass chosen by the HTTP status. API Gateway's own
answers (`{"message": "Too Many Requests"}`, `{"message": "Not Found"}`) carry no code: the status
names one (`too_many_requests`, `route_not_found`)."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    """Any failure the client reports. `status` is the HTTP status (0 when no answer came)."""

    status: int = 0

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int | None = None,
        field: str | None = None,
        details: list[dict[str, Any]] | None = None,
        run_id: str | None = None,
        retry_after: float | None = None,
        limit: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        if status is not None:
            self.status = status
        self.field = field
        self.details = details or []
        self.run_id = run_id
        self.retry_after = retry_after
        self.limit = limit  # 402 limit_exceeded: {name, scope, value, spentUsd?, resetsAt?}

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        status = f"{self.status} " if self.status else ""
        return f"{status}{self.code}: {self.message}{where}"


class TransportError(EngramError):
    """No HTTP answer: the connection failed or the request timed out."""


class ClientError(EngramError):
    """A 4xx: the request was refused; sending it again unchanged will not help (429 aside)."""


class BadRequestError(ClientError):
    status = 400


class AuthenticationError(ClientError):
    status = 401


class PermissionDeniedError(ClientError):
    status = 403


class NotFoundError(ClientError):
    status = 404


class LimitExceededError(ClientError):
    """402 limit_exceeded: a spending limit is reached (`limit` names it and when it resets);
    not retried: it takes a person raising the limit, or the reset."""

    status = 402


class ConflictError(ClientError):
    """409: quota_exceeded, session_busy, session_exists, ..."""

    status = 409


class PayloadTooLargeError(ClientError):
    status = 413


class UnsupportedMediaTypeError(ClientError):
    status = 415


class RateLimitError(ClientError):
    """429 after the client's retries."""

    status = 429


class ServerError(EngramError):
    """A 5xx: the server failed; 503 is retried by the client first."""


class InternalServerError(ServerError):
    status = 500


class BadGatewayError(ServerError):
    """502 model_error: the model provider failed after its retries."""

    status = 502


class ServiceUnavailableError(ServerError):
    """503 storage_unavailable / queue_unavailable after the client's retries."""

    status = 503


class GatewayTimeoutError(ServerError):
    """504 turn_timeout."""

    status = 504


class StreamError(EngramError):
    """The WebSocket API refused a frame (`{type: "error", error}`) or the socket failed."""


BY_STATUS: dict[int, type[EngramError]] = {
    cls.status: cls
    for cls in (
        BadRequestError,
        AuthenticationError,
        LimitExceededError,
        PermissionDeniedError,
        NotFoundError,
        ConflictError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        RateLimitError,
        InternalServerError,
        BadGatewayError,
        ServiceUnavailableError,
        GatewayTimeoutError,
    )
}
DEFAULT_CODES = {404: "route_not_found", 429: "too_many_requests", 413: "payload_too_large"}


def error_for(status: int, body: Any, retry_after: float | None = None) -> EngramError:
    """The exception for an answer with this status and decoded body (None when not JSON)."""
    cls = BY_STATUS.get(status) or (ClientError if 400 <= status < 500 else ServerError if status >= 500 else EngramError)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return cls(
            str(error.get("message", "")),
            code=str(error.get("code", "error")),
            status=status,
            field=error.get("field"),
            details=error.get("details"),
            run_id=error.get("runId"),
            retry_after=retry_after,
            limit=error.get("limit") if isinstance(error.get("limit"), dict) else None,
        )
    message = body.get("message") if isinstance(body, dict) else None
    return cls(
        str(message or f"HTTP {status}"), code=DEFAULT_CODES.get(status, f"http_{status}"), status=status, retry_after=retry_after
    )
