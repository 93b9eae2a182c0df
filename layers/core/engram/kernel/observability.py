"""One place for logs, metrics and traces (powertools), shared by every function."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger(service="engram")
metrics = Metrics(namespace="Engram", service="engram")
tracer = Tracer(service="engram")

__all__ = ["logger", "metrics", "tracer", "MetricUnit"]

# A request that records no business metric is normal (most CRUD calls); the warning is noise.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No application metrics to publish")
