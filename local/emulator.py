"""Makes moto's DynamoDB safe for concurrent callers, as the real service is.

moto's DynamoDB backend keeps items in plain dicts and takes no lock: a Query iterating a
partition while another thread writes to it fails with "dictionary changed size during
iteration" (a 500 the SDK retries after a backoff). Council runs write from several threads at
once, so the local stack and the tests serialise DynamoDB requests to the emulator. Other
services are left alone (SQS long polls must not hold a lock).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_LOCK = threading.RLock()


def serialize_dynamodb() -> None:
    """Idempotent: wraps moto's DynamoDB request handler in one process-wide lock."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "_engram_serialized", False):
        return
    original = DynamoHandler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

    call_action._engram_serialized = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
