"""The local stack as `make dev` runs it (offline model), one per test module that asks for it."""

from __future__ import annotations

import pytest

from local.stack import start_stack


@pytest.fixture(scope="module")
def live():
    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        yield handle
    finally:
        handle.stop()
