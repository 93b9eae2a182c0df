"""Limits in template.yaml (issue 11, item 6): the HTTP API's default-route throttling, reserved
concurrency for every function (0 = unreserved), and MaximumConcurrency on every SQS event source
(a parameter where the source's jobs call the model)."""

from __future__ import annotations

from local.template import load_template

TEMPLATE = load_template()
RESOURCES = TEMPLATE.resources
# The stack's functions at run time (ConsoleLoginFunction runs only while CloudFormation deploys).
FUNCTIONS = {
    name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function" and name not in TEMPLATE.deploy_helpers()
}


def test_http_api_default_route_throttling_is_parameterised():
    settings = RESOURCES["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert settings == {
        "ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"},
    }
    params = TEMPLATE.parameters
    assert params["ApiThrottlingRateLimit"]["Type"] == params["ApiThrottlingBurstLimit"]["Type"] == "Number"
    assert 0 < params["ApiThrottlingRateLimit"]["Default"] <= params["ApiThrottlingBurstLimit"]["Default"]


def test_every_function_has_a_reserved_concurrency_parameter_where_0_leaves_it_unreserved():
    # The authorizer is not capped: every uncached request of every route passes through it, so a
    # cap on it would throttle the whole API; the throttling settings of the stage bound it.
    capped = {name: f for name, f in FUNCTIONS.items() if name != "AuthorizerFunction"}
    assert set(capped) == {"ApiFunction", "ChatFunction", "ExtractFunction", "HeartbeatFunction"}
    conditions = TEMPLATE.conditions
    for name, function in capped.items():
        prefix = name.removesuffix("Function")
        param = f"{prefix}ReservedConcurrency"
        assert function["Properties"]["ReservedConcurrentExecutions"] == {
            "Fn::If": [f"Reserve{prefix}", {"Ref": param}, {"Ref": "AWS::NoValue"}]
        }, name
        assert conditions[f"Reserve{prefix}"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": param}, "0"]}]}
        spec = TEMPLATE.parameters[param]
        assert (spec["Type"], spec["Default"], spec["MinValue"]) == ("Number", 0, 0)  # unreserved unless asked


def test_every_sqs_event_source_has_a_maximum_concurrency_the_turn_queue_included():
    sources = {}
    for name, function in FUNCTIONS.items():
        for event in function["Properties"].get("Events", {}).values():
            if event["Type"] == "SQS":
                sources[event["Properties"]["Queue"]["Fn::GetAtt"][0]] = (name, event["Properties"]["ScalingConfig"])
    assert set(sources) == {"TurnQueue", "ExtractQueue", "RunQueue", "FailedFiringQueue"}
    assert sources["TurnQueue"][0] == "ChatFunction"
    # Recording a failed firing is a few DynamoDB writes, no model call: a fixed small cap.
    assert sources.pop("FailedFiringQueue") == ("HeartbeatFunction", {"MaximumConcurrency": 2})
    for queue, (_name, scaling) in sources.items():
        param = scaling["MaximumConcurrency"]["Ref"]
        spec = TEMPLATE.parameters[param]
        assert param == f"{queue}MaxConcurrency" and spec["MinValue"] == 2 and 2 <= spec["Default"] <= 10, queue


def test_a_batch_of_turns_never_outlives_the_chat_function():
    # ST7: the records of a batch run one after another, each with its whole budget; five 300 s
    # turns in one 900 s invocation were killed and came back only after the visibility timeout.
    chat = TEMPLATE.function("ChatFunction")
    (source,) = chat.sqs
    budget = TEMPLATE.parameters["TurnBudgetSeconds"]
    assert source.batch_size * budget["MaxValue"] < chat.timeout
