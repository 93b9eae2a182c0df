"""ExtractFunction in template.yaml: queue wiring, timeouts and least-privilege IAM."""

from __future__ import annotations

import json

from local.template import load_template

TEMPLATE = load_template()


def _props(logical_id: str) -> dict:
    return TEMPLATE.resources[logical_id]["Properties"]


def test_extract_function_consumes_the_extraction_queue_with_partial_failures():
    spec = TEMPLATE.function("ExtractFunction")
    assert (spec.code_uri, spec.handler) == ("functions/extract/", "app.lambda_handler")
    (source,) = spec.sqs
    assert (source.queue_id, source.batch_size, source.report_failures) == ("ExtractQueue", 1, True)
    event = _props("ExtractFunction")["Events"]["ExtractJobs"]["Properties"]
    most = event["ScalingConfig"]["MaximumConcurrency"]
    assert most == {"Ref": "ExtractQueueMaxConcurrency"}
    assert TEMPLATE.parameters["ExtractQueueMaxConcurrency"]["Default"] <= 10  # a burst of runs is not a burst of model calls


def test_extract_queue_visibility_is_six_times_the_timeout_and_has_a_dlq():
    queue = _props("ExtractQueue")
    assert queue["VisibilityTimeout"] >= 6 * TEMPLATE.function("ExtractFunction").timeout
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["ExtractDLQ", "Arn"]}
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 3


def test_extract_function_policy_is_least_privilege():
    (policy,) = _props("ExtractFunction")["Policies"]
    statements = policy["Statement"]
    flat = json.dumps(statements)
    assert '"*"' not in flat and '"Resource": "*"' not in flat
    by_sid = {}
    for s in statements:
        if "Fn::If" in s:  # provider-specific statements: the same conditions as ChatFunction's
            condition, chosen, _ = s["Fn::If"]
            by_sid[chosen["Sid"]] = (condition, chosen)
        else:
            by_sid[s["Sid"]] = (None, s)
    table = by_sid["Table"][1]
    assert set(table["Action"]) == {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:BatchGetItem",
        "dynamodb:TransactWriteItems",
    }
    assert table["Resource"] == {"Fn::GetAtt": ["EngramTable", "Arn"]}
    assert by_sid["MemoryRanks"][1]["Action"] == "dynamodb:Query" and by_sid["MemoryRanks"][1]["Resource"] == {
        "Fn::Sub": "${EngramTable.Arn}/index/GSI2"
    }
    assert by_sid["Transcripts"][1]["Action"] == "s3:GetObject"
    assert not any("sqs:" in a for s in statements for a in json.dumps(s).split('"') if a.startswith("sqs:"))
    chat = {s["Fn::If"][1]["Sid"]: s["Fn::If"] for s in _props("ChatFunction")["Policies"][0]["Statement"] if "Fn::If" in s}
    # the key's secret: the one the stack created, or the one the owner named (never both, never *)
    assert by_sid["AnthropicKey"][0] == chat["AnthropicKey"][0] == "CreateAnthropicSecret"
    assert by_sid["AnthropicKey"][1]["Resource"] == chat["AnthropicKey"][1]["Resource"] == {"Ref": "AnthropicApiKey"}
    assert by_sid["GivenAnthropicKey"][0] == chat["GivenAnthropicKey"][0] == "UseGivenAnthropicSecret"
    assert by_sid["GivenAnthropicKey"][1]["Resource"] == chat["GivenAnthropicKey"][1]["Resource"] == {"Ref": "AnthropicSecretArn"}
    assert by_sid["Bedrock"][0] == chat["Bedrock"][0] == "UseBedrock"
    assert by_sid["Bedrock"][1]["Action"] == "bedrock:InvokeModel"
    assert by_sid["Bedrock"][1]["Resource"] == chat["Bedrock"][1]["Resource"]
