"""The functions that call the model import the anthropic SDK during init, not in their first
request (issue 13, item 2); the api function never imports it, and with the offline model no
function does."""

from __future__ import annotations

import pytest

from tests.handler_probe import import_handler


def _imports_sdk(function: str, provider: str) -> bool:
    printed = import_handler(
        function, 'print("anthropic" in sys.modules)', POWERTOOLS_TRACE_DISABLED="true", MODEL_PROVIDER=provider
    )
    return printed[-1] == "True"


@pytest.mark.parametrize("function", ["chat", "heartbeat", "extract"])
def test_model_functions_import_the_sdk_at_init_with_claude_only(function):
    assert _imports_sdk(function, "anthropic") is True
    assert _imports_sdk(function, "offline") is False


def test_the_api_function_never_imports_it():
    assert _imports_sdk("api", "anthropic") is False
