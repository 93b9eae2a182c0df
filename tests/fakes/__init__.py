"""In-memory fakes of the AWS services Engram talks to (DynamoDB, S3, SQS, EventBridge
Scheduler, KMS, the WebSocket API's management API), at the boto3 client boundary.

Why the client boundary and not one fake per repository: the eleven DynamoDB repositories share
one table and the end of a turn is ONE TransactWriteItems across several of them (session, run,
usage, archive); per-repository fakes could not take part in that transaction, and would leave the
repositories' own code (keys, conditions, paging) untested in every behaviour test. A fake client
runs the real repositories, the real `Table` helper and the real handlers, in memory, with no
botocore serialisation and no emulator: a behaviour test costs milliseconds. The contract tests
(tests/contract) run each repository and store against these fakes AND against moto, so a fake
cannot drift from the emulator.

Resources are created the same way as on moto: `local.resources.create_resources(template)` calls
the fakes' create_table / create_bucket / create_queue / create_schedule_group, so the key schema,
indexes and queue attributes come from template.yaml.

    with fake_aws() as aws:      # boto3.client("dynamodb") etc. now return aws.dynamodb etc.
        ...
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError


def client_error(operation: str, code: str, message: str = "", *, status: int = 400, **extra: Any) -> ClientError:
    """The ClientError botocore raises for an AWS error response."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, operation)  # type: ignore[arg-type]


class FakeAWS:
    """One account's worth of fake services (one region)."""

    def __init__(self, region: str = "us-east-1"):
        from tests.fakes.dynamodb import FakeDynamoDB
        from tests.fakes.kms import FakeKMS
        from tests.fakes.s3 import FakeS3
        from tests.fakes.scheduler import FakeScheduler
        from tests.fakes.sockets import FakeManagementApi
        from tests.fakes.sqs import FakeSQS

        self.region = region
        self.dynamodb = FakeDynamoDB(region)
        self.s3 = FakeS3(region)
        self.sqs = FakeSQS(region)
        self.scheduler = FakeScheduler(region)
        self.kms = FakeKMS(region)
        self.apigatewaymanagementapi = FakeManagementApi(region)

    def client(self, service: str) -> Any:
        try:
            return getattr(self, service)
        except AttributeError:
            raise NotImplementedError(f"no fake for the {service} service") from None


_active: list[FakeAWS] = []
_lock = threading.Lock()


def active() -> FakeAWS | None:
    """The fake account boto3.client answers with, if any (see tests/conftest.py)."""
    return _active[-1] if _active else None


@contextmanager
def fake_aws(region: str = "us-east-1") -> Iterator[FakeAWS]:
    aws = FakeAWS(region)
    with _lock:
        _active.append(aws)
    try:
        yield aws
    finally:
        with _lock:
            _active.remove(aws)
