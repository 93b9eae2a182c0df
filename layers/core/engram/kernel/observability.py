"""One place for logs, metrics and traces (powertools), shared by every function."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
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


class _LambdaTracingOnly:
    """The tracer when the X-Ray SDK is not wanted (POWERTOOLS_TRACE_DISABLED, template parameter
    TraceAwsCalls=false, the default): Lambda's active tracing still records every invocation,
    but without the SDK's subsegments for each AWS call, and aws_xray_sdk (~0.3 s of a cold
    start) is never imported. The same decorator names as powertools' Tracer."""

    def capture_lambda_handler(self, lambda_handler: object = None, **_options: object) -> object:
        return lambda_handler if lambda_handler is not None else (lambda handler: handler)

    def capture_method(self, method: object = None, **_options: object) -> object:
        return method if method is not None else (lambda function: function)


def _sdk_tracing_wanted() -> bool:
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in ("true", "1")


logger = Logger(service="engram")
metrics = Metrics(namespace="Engram", service="engram", provider=_QuietWhenDisabled(namespace="Engram", service="engram"))
tracer: Any = Tracer(service="engram") if _sdk_tracing_wanted() else _LambdaTracingOnly()

__all__ = ["logger", "metrics", "tracer", "MetricUnit"]

# A request that records no business metric is normal (most CRUD calls); the warning is noise.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No application metrics to publish")


def metric_by(name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
    """One metric with dimensions of its own (e.g. a tool call's Connection), printed at once as its
    own EMF line: the function's shared metrics carry no per-call dimension. Nothing when disabled."""
    if is_metrics_disabled():
        return
    with single_metric(name=name, unit=unit, value=value, namespace="Engram") as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)
