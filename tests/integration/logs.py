"""What the functions log at INFO and above, as the JSON lines CloudWatch would receive."""

from __future__ import annotations

import logging

import pytest

from engram.kernel.observability import logger


def info_log(caplog: pytest.LogCaptureFixture) -> str:
    """Every record of the test at INFO or above, rendered by the powertools formatter (so extra
    keys, where message text could hide, are in it too)."""
    formatter = logger.registered_formatter
    return "\n".join(formatter.format(r) for r in caplog.records if r.levelno >= logging.INFO)
