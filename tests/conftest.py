"""Shared test setup: no real AWS, no network."""

import os

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

# moto's DynamoDB is not thread-safe (the service is): council runs write from several threads.
from local.emulator import serialize_dynamodb  # noqa: E402

serialize_dynamodb()
