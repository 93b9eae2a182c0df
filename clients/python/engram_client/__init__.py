"""Engram's Python client: `Client(url, api_key)` with a typed method per route of the HTTP API,
paging iterators, errors as exceptions, retries, and live turns over the WebSocket API.

    from engram_client import Client
    with Client("http://127.0.0.1:3000", "dev-alice") as engram:
        agent = engram.create_agent(name="Scout")
        for event in engram.stream_turn(agent["id"], "dashboard", "hello"):
            ...

Names are loaded on first use, so `import engram_client` (and the `engram` command) stays cheap."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import OPERATIONS, Client
    from .errors import (
        AuthenticationError,
        ClientError,
        ConflictError,
        EngramError,
        LimitExceededError,
        NotFoundError,
        PermissionDeniedError,
        RateLimitError,
        ServerError,
        ServiceUnavailableError,
        StreamError,
        TransportError,
    )
    from .streaming import Stream, StreamEvent

__version__ = "0.1.0"

_WHERE = {
    "Client": "client",
    "OPERATIONS": "client",
    "Stream": "streaming",
    "StreamEvent": "streaming",
    **dict.fromkeys(
        [
            "EngramError",
            "TransportError",
            "ClientError",
            "BadRequestError",
            "AuthenticationError",
            "PermissionDeniedError",
            "NotFoundError",
            "ConflictError",
            "LimitExceededError",
            "PayloadTooLargeError",
            "UnsupportedMediaTypeError",
            "RateLimitError",
            "ServerError",
            "InternalServerError",
            "BadGatewayError",
            "ServiceUnavailableError",
            "GatewayTimeoutError",
            "StreamError",
        ],
        "errors",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "OPERATIONS",
    "AuthenticationError",
    "Client",
    "ClientError",
    "ConflictError",
    "EngramError",
    "LimitExceededError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "ServiceUnavailableError",
    "Stream",
    "StreamError",
    "StreamEvent",
    "TransportError",
]
