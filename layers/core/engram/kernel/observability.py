"""One place for logs, metrics and traces (powertools), shared by every function."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider


class _QuietWhenDisabled(AmazonCloudWatchEMFProvider):
    """POWERTOOLS_METRICS_DISABLED (set by the local stack) stops powertools' flush at the end of a
    request, but not two other ways it prints EMF lines: the cold-start metric (its own
    single_metric) and the automatic flush at 100 values. With metrics off, none is recorded."""

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        if not is_metrics_disabled():
            super().add_metric(*args, **kwargs)

    def add_cold_start_metric(self, *args: Any, **kwargs: Any) -> None:
        if not is_metrics_disabled():
            super().add_cold_start_metric(*args, **kwargs)


logger = Logger(service="engram")
metrics = Metrics(namespace="Engram", service="engram", provider=_QuietWhenDisabled(namespace="Engram", service="engram"))
tracer = Tracer(service="engram")

__all__ = ["logger", "metrics", "tracer", "MetricUnit"]

# A request that records no business metric is normal (most CRUD calls); the warning is noise.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No application metrics to publish")
