"""Faults injected at the AWS client boundary, for the fakes, moto and the local stack alike.

Every boto3 client the tests create (see tests/conftest.py) is wrapped by `FaultyClient`, which
passes calls through unless a rule of the active `Faults` matches. The faults are the ones a
Lambda function meets in AWS:

- LOST: the call is applied, its response is lost on the way back, and the SDK retries the same
  request (same parameters, so the same idempotency tokens); the caller sees the retry's answer.
- LOST_FOR_GOOD: applied, response lost, and the SDK's retries give up: ReadTimeoutError.
- REFUSED: not applied; the service answers an error (503 ServiceUnavailable unless `error=`).
- UNREACHABLE: not applied; the connection fails (EndpointConnectionError).
- STALL: the call waits `seconds` before it goes on (a slow or hung service).

    with inject() as faults:
        faults.add("dynamodb", "TransactWriteItems", LOST)
        ...
    assert faults.injected == [("dynamodb", "TransactWriteItems", "lost")]

Paginators of real clients call the wrapped client's own methods, so their pages pass untouched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

from tests.fakes import client_error

LOST = "lost"
LOST_FOR_GOOD = "lost_for_good"
REFUSED = "refused"
UNREACHABLE = "unreachable"
STALL = "stall"

_STATUS = {
    "AccessDenied": 403,
    "ServiceUnavailable": 503,
    "InternalServerError": 500,
    "InternalError": 500,
    "SlowDown": 503,
    "ThrottlingException": 400,
}


@dataclass
class Rule:
    service: str
    operation: str  # the API's name: TransactWriteItems, PutObject, SendMessage
    fault: str
    times: int = 1  # how many matching calls get the fault (then the rule is spent)
    skip: int = 0  # let this many matching calls through first
    when: Callable[[dict[str, Any]], bool] | None = None  # only calls whose parameters match
    error: str = "ServiceUnavailable"
    seconds: float = 0.0
    finished: threading.Event = field(default_factory=threading.Event)  # set when a faulty call has ended

    def matches(self, service: str, operation: str, params: dict[str, Any]) -> bool:
        return (
            self.times > 0
            and self.service == service
            and self.operation == operation
            and (self.when is None or self.when(params))
        )


@dataclass
class Faults:
    rules: list[Rule] = field(default_factory=list)
    injected: list[tuple[str, str, str]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # every call made while active
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, service: str, operation: str, fault: str, **options: Any) -> Rule:
        rule = Rule(service, operation, fault, **options)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """No more faults (the rules not yet spent are dropped)."""
        with self._lock:
            self.rules.clear()

    def take(self, service: str, operation: str, params: dict[str, Any]) -> Rule | None:
        """The rule that applies to this call, if any (counting it)."""
        with self._lock:
            self.calls.append((service, operation))
            for rule in self.rules:
                if rule.matches(service, operation, params):
                    if rule.skip > 0:
                        rule.skip -= 1
                        return None
                    rule.times -= 1
                    self.injected.append((service, operation, rule.fault))
                    return rule
        return None


_active: list[Faults] = []


@contextmanager
def inject() -> Iterator[Faults]:
    faults = Faults()
    _active.append(faults)
    try:
        yield faults
    finally:
        _active.remove(faults)


def _operation_name(method: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in method.split("_"))  # list_objects_v2 -> ListObjectsV2


class FaultyClient:
    """A boto3 client (real, moto's or a fake) whose API calls pass through the active faults."""

    def __init__(self, service: str, client: Any):
        self._service = service
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr) or name in ("get_paginator", "can_paginate", "get_waiter", "close"):
            return attr
        service, operation = self._service, _operation_name(name)

        def call(**params: Any) -> Any:
            faults = _active[-1] if _active else None
            rule = faults.take(service, operation, params) if faults is not None else None
            if rule is None:
                return attr(**params)
            if rule.fault == REFUSED:
                raise client_error(operation, rule.error, f"{rule.error} (injected)", status=_STATUS.get(rule.error, 500))
            if rule.fault == UNREACHABLE:
                raise EndpointConnectionError(endpoint_url=f"https://{service}.us-east-1.amazonaws.com")
            if rule.fault == STALL:
                time.sleep(rule.seconds)
                try:
                    return attr(**params)
                finally:
                    rule.finished.set()
            try:
                attr(**params)  # applied; the response never arrives
            except Exception:
                pass
            if rule.fault == LOST_FOR_GOOD:
                raise ReadTimeoutError(endpoint_url=f"https://{service}.us-east-1.amazonaws.com")
            return attr(**params)  # LOST: the SDK's retry of the same request

        return call
