"""With metrics disabled (the local stack, `make bench`), no EMF line reaches stdout: not the
cold-start metric, not powertools' automatic flush at 100 values. Enabled, they are printed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engram.kernel.observability import MetricUnit, metrics


@pytest.fixture(autouse=True)
def _clean_metric_set():
    metrics.provider.clear_metrics()
    yield
    metrics.provider.clear_metrics()


def _handler_run(n: int) -> None:
    @metrics.log_metrics(capture_cold_start_metric=True)
    def handler(event, context):
        for _ in range(n):
            metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=12.0)
        return {}

    handler({}, SimpleNamespace(function_name="engram-local-ChatFunction"))


def test_disabled_metrics_print_nothing(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr("aws_lambda_powertools.metrics.provider.cold_start.is_cold_start", True, raising=False)
    _handler_run(250)
    assert '"_aws"' not in capsys.readouterr().out


def test_enabled_metrics_are_printed_as_emf(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    _handler_run(3)
    out = capsys.readouterr().out
    assert '"_aws"' in out and "TurnLatency" in out
