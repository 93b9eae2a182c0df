"""Shared test setup: no real AWS, no network."""

import os
from collections.abc import Iterator

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("ANTHROPIC_API_KEY", None)

# The local stack's changes to moto (local/emulator.py), for every moto backend of this test process:
# DynamoDB requests serialised (moto's backend is not thread-safe, the service is: council runs
# write from several threads), transactions journalled, moto's instance registry off, queries
# reading only their partition or index key, item answers written as JSON directly.
from local.emulator import patch_moto

patch_moto()


# Creating a boto3 client costs ~80 ms (its service model is loaded and a class built), and every
# test builds a fresh stack: the functions' stores, the resource creator and the queue workers
# would create a dozen. A client holds no AWS state (moto's backends are reset per test), so tests
# share one client per (service, region, endpoint, config).
import boto3  # noqa: E402

from tests import fakes  # noqa: E402
from tests.faults import FaultyClient  # noqa: E402

_real_client = boto3.client
_shared_clients: dict[tuple[object, ...], object] = {}


def _shared_client(service_name: str, *args: object, **kwargs: object) -> object:
    fake = fakes.active()
    if fake is not None:
        return FaultyClient(service_name, fake.client(service_name))
    if args:
        return FaultyClient(service_name, _real_client(service_name, *args, **kwargs))
    config = kwargs.get("config")
    options = repr(sorted(getattr(config, "_user_provided_options", {}).items())) if config is not None else ""
    # The local stack points clients at its emulator through AWS_ENDPOINT_URL: part of the key too.
    endpoint = kwargs.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL")
    key = (service_name, kwargs.get("region_name"), endpoint, options)  # type: ignore[assignment]
    if key not in _shared_clients:
        _shared_clients[key] = FaultyClient(service_name, _real_client(service_name, **kwargs))  # type: ignore[arg-type]
    return _shared_clients[key]


boto3.client = _shared_client  # type: ignore[assignment]


# Every client passes its calls through tests/faults.py (a no-op unless a test injects faults).


import pytest  # noqa: E402

from tests.faults import Faults, inject  # noqa: E402


@pytest.fixture
def faults() -> Iterator[Faults]:
    """Faults to inject at the AWS clients for this test (see tests/faults.py)."""
    with inject() as active:
        yield active
