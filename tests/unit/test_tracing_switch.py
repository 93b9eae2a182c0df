"""Tracing (issue 12, item 1): Lambda's active tracing is always on in the template; the X-Ray SDK
(a subsegment per AWS call, ~0.3 s of import) only with TraceAwsCalls=true. Without it the
handlers never import aws_xray_sdk and their decorators still wrap them."""

from __future__ import annotations

import pytest

from local.template import load_template
from tests.handler_probe import import_handler


def _load(function: str, trace_disabled: str) -> tuple[str, bool]:
    printed = import_handler(
        function,
        'print(type(module.tracer).__name__, "aws_xray_sdk" in sys.modules)',
        MODEL_PROVIDER="offline",
        POWERTOOLS_TRACE_DISABLED=trace_disabled,
        AWS_LAMBDA_FUNCTION_NAME=f"engram-{function}",
    )
    return printed[-2], printed[-1] == "True"


@pytest.mark.parametrize("function", ["api", "chat"])
def test_without_sdk_tracing_the_sdk_is_never_imported(function):
    assert _load(function, "true") == ("_LambdaTracingOnly", False)
    assert _load(function, "false") == ("Tracer", True)


def test_the_template_keeps_active_tracing_and_asks_for_the_sdk_by_parameter():
    template = load_template()
    assert template.function_globals["Tracing"] == "Active"
    env = template.function_globals["Environment"]["Variables"]
    assert env["POWERTOOLS_TRACE_DISABLED"] == {"Fn::If": ["WantSdkTracing", "false", "true"]}
    assert template.parameters["TraceAwsCalls"]["Default"] == "false"
    assert template.conditions["WantSdkTracing"] == {"Fn::Equals": [{"Ref": "TraceAwsCalls"}, "true"]}


def test_the_lambda_only_tracer_wraps_nothing():
    from engram.kernel.observability import _LambdaTracingOnly

    tracer = _LambdaTracingOnly()

    def handler(event, context):
        return event

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler
    assert tracer.capture_method(handler) is handler
