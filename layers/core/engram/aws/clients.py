"""boto3 clients for the stores: created lazily, once, with bounded timeouts and standard retries.

Standard retry mode backs off on throttling (ProvisionedThroughputExceeded, SlowDown, ...) and
transient 5xx; the short timeouts keep a stuck connection from eating a turn's budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.aws.deadline import BoundedClient

if TYPE_CHECKING:
    from botocore.exceptions import ClientError as ClientError


def __getattr__(name: str) -> type[ClientError]:
    """`clients.ClientError` is botocore's, imported when first read. In an `except` clause that is
    when an exception reaches the clause, after a call that imported boto3, so the modules that
    catch it do not import botocore with them (~21 M instructions of the api function's import)."""
    if name != "ClientError":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from botocore.exceptions import ClientError

    error: type[ClientError] = ClientError
    return error


def client_config(**options: object) -> object:
    """The botocore Config of every client; `options`: further settings (s3v4 for presigning)."""
    from botocore.config import Config

    return Config(
        retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3, read_timeout=10, max_pool_connections=16, **options
    )


def make_client(service: str, *, endpoint_url: str | None = None, **options: object) -> object:
    """`options`: further botocore Config settings (an S3 client that presigns URLs: s3v4);
    `endpoint_url`: a service reached at its own address (the WebSocket API's management API)."""
    import boto3

    endpoint = {"endpoint_url": endpoint_url} if endpoint_url else {}
    # A turn's calls also end by its deadline (aws.deadline): botocore's timeouts are per attempt.
    return BoundedClient(boto3.client(service, config=client_config(**options), **endpoint))
