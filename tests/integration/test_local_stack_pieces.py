"""The local stack against moto: resources from the template, the HTTP path and the SQS workers,
driven through tiny stub handlers (not the real functions)."""

from __future__ import annotations

import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from local.apigw import invoke_http, load_functions
from local.resources import create_resources
from local.stack import function_environment, start_stack
from local.template import TEMPLATE_PATH, load_template
from local.workers import Workers

STUB_API = """
import json

CALLS = []


def lambda_handler(event, context):
    CALLS.append(event)
    query = event.get("queryStringParameters") or {}
    if "raise" in query:
        raise RuntimeError("boom")
    if "simple" in query:
        return {"simple": True}
    return {
        "statusCode": 200,
        "headers": {"content-type": "application/json", "x-fn": context.function_name},
        "cookies": ["seen=1"] if "cookie" in query else [],
        "body": json.dumps({"event": event, "remainingMs": context.get_remaining_time_in_millis()}),
    }
"""

STUB_CHAT = """
import json

CALLS = []


def lambda_handler(event, context):
    CALLS.append(event)
    if "Records" not in event:
        return {"statusCode": 202, "body": json.dumps({"event": event})}
    failures = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        if body.get("raise"):
            raise RuntimeError("the whole batch fails")
        if body.get("fail"):
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""


# The Lambda authorizer refusing every token that is not `dev-<user>` (which never reaches it).
STUB_REFUSE = """
def lambda_handler(event, context):
    raise Exception("Unauthorized")
"""


def _write_stubs(root: Path) -> Path:
    for folder, code in (
        ("functions/api", STUB_API),
        ("functions/chat", STUB_CHAT),
        ("functions/extract", STUB_CHAT),
        ("functions/heartbeat", STUB_CHAT),
        ("functions/authorizer", STUB_REFUSE),
    ):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "app.py").write_text(textwrap.dedent(code))
    return root


@pytest.fixture
def template():
    return load_template()


@pytest.fixture
def aws():
    with mock_aws():
        yield


@pytest.fixture
def resources(aws, template):
    return create_resources(template)


@pytest.fixture
def functions(template, tmp_path):
    fns = load_functions(template, _write_stubs(tmp_path))
    yield fns
    fns.unload()


def _calls(functions, logical_id):
    return functions[logical_id].handler().__globals__["CALLS"]


# --------------------------------------------------------------------------- resources
def test_table_matches_the_template(resources, template):
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = ddb.describe_table(TableName=resources.table_name())["Table"]
    props = template.resources["EngramTable"]["Properties"]
    assert (
        table["KeySchema"]
        == props["KeySchema"]
        == [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}]
    )
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    gsis = {g["IndexName"]: g for g in table["GlobalSecondaryIndexes"]}
    assert set(gsis) == {"GSI1", "GSI2", "GSI3"}
    for name in ("GSI1", "GSI2", "GSI3"):
        assert gsis[name]["KeySchema"] == [
            {"AttributeName": f"{name}PK", "KeyType": "HASH"},
            {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
        ]
        assert gsis[name]["Projection"] == {"ProjectionType": "KEYS_ONLY" if name == "GSI3" else "ALL"}
    ttl = ddb.describe_time_to_live(TableName=resources.table_name())["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}


def test_queues_match_the_template(resources):
    sqs = boto3.client("sqs", region_name="us-east-1")

    def attrs(logical_id):
        return sqs.get_queue_attributes(QueueUrl=resources.queue_url(logical_id), AttributeNames=["All"])["Attributes"]

    turn, extract = attrs("TurnQueue"), attrs("ExtractQueue")
    assert resources.queue_url("TurnQueue").endswith(".fifo") and resources.queue_url("TurnDLQ").endswith(".fifo")
    assert (turn["FifoQueue"], turn["ContentBasedDeduplication"], turn["VisibilityTimeout"]) == ("true", "false", "5400")
    assert json.loads(turn["RedrivePolicy"]) == {"deadLetterTargetArn": resources.queue_arn("TurnDLQ"), "maxReceiveCount": 3}
    assert "FifoQueue" not in extract and extract["VisibilityTimeout"] == "360"
    assert json.loads(extract["RedrivePolicy"]) == {
        "deadLetterTargetArn": resources.queue_arn("ExtractDLQ"),
        "maxReceiveCount": 3,
    }
    assert all(attrs(q)["SqsManagedSseEnabled"] == "true" for q in ("TurnQueue", "TurnDLQ", "ExtractQueue", "ExtractDLQ"))


def test_bucket_is_private_and_encrypted(resources):
    s3 = boto3.client("s3", region_name="us-east-1")
    name = resources.bucket_name()
    rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    assert all(block.values()) and len(block) == 4


def test_function_environment_names_the_local_resources(resources):
    env = resources.env("ChatFunction")
    assert env["TABLE_NAME"] == resources.table_name() == "engram-local-engram-table"
    assert env["BUCKET_NAME"] == resources.bucket_name() == "engram-local-state-bucket"
    assert env["TURN_QUEUE_URL"] == resources.queue_url("TurnQueue")
    assert env["EXTRACT_QUEUE_URL"] == resources.queue_url("ExtractQueue")
    assert (env["MODEL_PROVIDER"], env["ANTHROPIC_SECRET_ARN"], env["HISTORY_CAP"]) == ("offline", "", "50")
    assert (env["CHAT_MODEL"], env["EXTRACT_MODEL"]) == ("claude-sonnet-4-6", "claude-haiku-4-5-20251001")
    assert (env["POWERTOOLS_SERVICE_NAME"], env["POWERTOOLS_METRICS_NAMESPACE"], env["POWERTOOLS_LOG_LEVEL"]) == (
        "engram",
        "Engram",
        "INFO",
    )
    assert resources.env(model_provider="anthropic")["MODEL_PROVIDER"] == "anthropic"
    assert (env["TRACING_EXPORT"], env["OTEL_EXPORTER_OTLP_ENDPOINT"]) == ("off", "")


def test_make_dev_sends_run_timelines_to_a_collector_named_in_the_shell(resources, template):
    assert function_environment(template, resources, "offline", {})["TRACING_EXPORT"] == "off"
    named = function_environment(template, resources, "offline", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert (named["TRACING_EXPORT"], named["OTEL_EXPORTER_OTLP_ENDPOINT"]) == ("otlp", "http://127.0.0.1:4318")


# --------------------------------------------------------------------------- HTTP
def test_authorized_request_reaches_the_handler_with_claims(functions):
    status, headers, body = invoke_http(functions, "GET", "/api/agents/a1/sessions/dashboard", user="alice", query={"limit": "5"})
    assert status == 200 and headers["x-fn"] == "engram-local-ApiFunction"
    payload = json.loads(body)
    event = payload["event"]
    assert event["routeKey"] == "GET /api/agents/{agentId}/sessions/{sessionId}"
    assert event["pathParameters"] == {"agentId": "a1", "sessionId": "dashboard"}
    assert event["queryStringParameters"] == {"limit": "5"}
    assert event["requestContext"]["authorizer"]["lambda"] == {
        "sub": "alice",
        "via": "jwt",
        "iss": "engram-local",
        "token_use": "access",
        "scope": "aws.cognito.signin.user.admin",
    }
    assert event["headers"]["authorization"] == "Bearer dev-alice"
    assert 0 < payload["remainingMs"] <= 15_000


def test_path_parameters_are_percent_decoded(functions):
    status, _, body = invoke_http(functions, "GET", "/api/agents/caf%C3%A9%20x", user="alice")
    event = json.loads(body)["event"]
    assert status == 200
    assert event["pathParameters"] == {"agentId": "café x"} and event["rawPath"] == "/api/agents/café x"
    # An encoded slash decodes into an extra segment, which no route has.
    assert invoke_http(functions, "GET", "/api/agents/a%2Fb", user="alice")[0] == 404


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"headers": {"Authorization": "Bearer alice"}},
        {"headers": {"Authorization": "Bearer dev-"}},
        {"headers": {"Authorization": "Bearer dev-a.b"}},
        {"user": "alice", "source_ip": "192.168.0.7"},
    ],
)
def test_unauthorized_requests_get_api_gateways_401(functions, kwargs):
    status, headers, body = invoke_http(functions, "GET", "/api/agents", **kwargs)
    assert (status, json.loads(body), headers["content-type"]) == (401, {"message": "Unauthorized"}, "application/json")
    assert _calls(functions, "ApiFunction") == []


def test_webhook_needs_no_token_and_gets_no_authorizer(functions):
    status, _, body = invoke_http(
        functions,
        "POST",
        "/api/agents/a1/webhook",
        body={"message": "hi"},
        headers={"X-Engram-Signature": "sha256=00", "X-Engram-Timestamp": "1"},
        source_ip="198.51.100.4",
    )
    event = json.loads(body)["event"]
    assert status == 202
    assert event["routeKey"] == "POST /api/agents/{agentId}/webhook"
    assert "authorizer" not in event["requestContext"]
    assert event["headers"]["x-engram-signature"] == "sha256=00" and event["body"] == '{"message": "hi"}'
    assert event["requestContext"]["http"]["sourceIp"] == "198.51.100.4"


def test_unknown_routes_errors_and_simple_responses(functions):
    assert invoke_http(functions, "GET", "/nope", user="alice")[:1] == (404,)
    assert invoke_http(functions, "PUT", "/api/agents", user="alice")[0] == 404
    status, _, body = invoke_http(functions, "GET", "/api/usage?raise=1", user="alice")
    assert (status, json.loads(body)) == (500, {"message": "Internal Server Error"})
    status, headers, body = invoke_http(functions, "GET", "/api/usage", query={"simple": "1"}, user="alice")
    assert (status, json.loads(body), headers["content-type"]) == (200, {"simple": True}, "application/json")
    _, headers, _ = invoke_http(functions, "GET", "/api/usage?cookie=1", user="alice")
    assert headers["set-cookie"] == "seen=1"


def test_a_cors_preflight_reaches_the_api_function_without_auth(functions):
    # template.yaml routes OPTIONS /{proxy+} to the api function with no authorizer (browsers send
    # preflights without a token); the function answers it (engram.api.http.cors_of).
    status, _, body = invoke_http(
        functions, "OPTIONS", "/api/agents", headers={"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"}
    )
    assert status == 200
    event = json.loads(body)["event"]
    assert event["routeKey"] == "OPTIONS /{proxy+}" and "authorizer" not in event["requestContext"]


# --------------------------------------------------------------------------- SQS workers
def _send(resources, logical_id, bodies, group="t#a1#dashboard"):
    sqs = boto3.client("sqs", region_name="us-east-1")
    for i, body in enumerate(bodies):
        extra = (
            {"MessageGroupId": group, "MessageDeduplicationId": f"d{i}-{json.dumps(body)}"}
            if logical_id.startswith("Turn")
            else {}
        )
        sqs.send_message(QueueUrl=resources.queue_url(logical_id), MessageBody=json.dumps(body), **extra)


def _depth(resources, logical_id):
    attrs = boto3.client("sqs", region_name="us-east-1").get_queue_attributes(
        QueueUrl=resources.queue_url(logical_id),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attrs.values())


def test_worker_deletes_successes_and_redrives_failures(resources, functions):
    workers = Workers(functions, resources, retry_delay=0)
    _send(resources, "TurnQueue", [{"n": 1}, {"n": 2, "fail": True}, {"n": 3}], group="g1")
    _send(resources, "TurnQueue", [{"n": 4}], group="g2")
    workers.drain("TurnQueue", timeout=60)

    records = [r for event in _calls(functions, "ChatFunction") for r in event["Records"]]
    first = records[0]
    assert first["eventSource"] == "aws:sqs" and first["eventSourceARN"] == resources.queue_arn("TurnQueue")
    assert first["awsRegion"] == "us-east-1" and first["md5OfBody"]
    assert {
        "MessageGroupId",
        "MessageDeduplicationId",
        "SequenceNumber",
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
    } <= first["attributes"].keys()
    assert all(len(event["Records"]) <= 5 for event in _calls(functions, "ChatFunction"))

    seen = {}
    for r in records:
        seen.setdefault(json.loads(r["body"])["n"], []).append(int(r["attributes"]["ApproximateReceiveCount"]))
    assert seen[1] == [1] and seen[4] == [1]
    assert seen[2] == [1, 2, 3]  # retried until maxReceiveCount, then moved to the DLQ
    assert 3 in seen
    assert _depth(resources, "TurnQueue") == 0
    dlq = boto3.client("sqs", region_name="us-east-1").receive_message(
        QueueUrl=resources.queue_url("TurnDLQ"), MaxNumberOfMessages=10
    )
    assert [json.loads(m["Body"])["n"] for m in dlq.get("Messages", [])] == [2]


def test_an_exception_fails_the_batch_and_a_turn_batch_is_one_turn(resources, functions):
    workers = Workers(functions, resources, retry_delay=0)
    _send(resources, "TurnQueue", [{"n": 1}, {"n": 2, "raise": True}], group="g1")
    workers.drain("TurnQueue", timeout=60)

    counts = {}
    for event in _calls(functions, "ChatFunction"):
        for r in event["Records"]:
            counts[json.loads(r["body"])["n"]] = int(r["attributes"]["ApproximateReceiveCount"])
    # One turn a batch (ST7): the first is handled once, the one that raises is handed back until
    # it goes to the DLQ after three attempts.
    assert counts == {1: 1, 2: 3}
    dlq = boto3.client("sqs", region_name="us-east-1").receive_message(
        QueueUrl=resources.queue_url("TurnDLQ"), MaxNumberOfMessages=10
    )
    assert sorted(json.loads(m["Body"])["n"] for m in dlq.get("Messages", [])) == [2]


def test_background_workers_start_and_stop(resources, functions):
    workers = Workers(functions, resources, retry_delay=0, wait_seconds=1)
    workers.start()
    try:
        _send(resources, "TurnQueue", [{"n": 1}])
        workers.drain("TurnQueue", timeout=60)  # shares the queue with the background poller
    finally:
        workers.stop()
    assert [json.loads(r["body"]) for e in _calls(functions, "ChatFunction") for r in e["Records"]] == [{"n": 1}]
    with pytest.raises(ValueError):
        workers.drain("ExtractDLQ", timeout=1)  # nothing consumes a DLQ


# --------------------------------------------------------------------------- the whole stack (loopback only)
def test_start_stack_serves_stub_handlers_over_loopback(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    handle = start_stack(0, root=_write_stubs(tmp_path), template_path=TEMPLATE_PATH, workers=False, retry_delay=0)
    try:
        assert handle.url.startswith("http://127.0.0.1:") and handle.model_provider == "offline"
        request = urllib.request.Request(f"{handle.url}/api/agents/a1", headers={"Authorization": "Bearer dev-alice"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as response:
            event = json.loads(response.read())["event"]
        assert event["pathParameters"] == {"agentId": "a1"}
        assert event["requestContext"]["authorizer"]["lambda"]["sub"] == "alice"
        with pytest.raises(urllib.error.HTTPError) as denied:
            opener.open(f"{handle.url}/api/agents", timeout=30)
        assert denied.value.code == 401

        # boto3 now talks to the stack's moto server; the chat stub consumes the turn queue.
        boto3.client("sqs").send_message(
            QueueUrl=handle.env["TURN_QUEUE_URL"], MessageBody='{"n": 1}', MessageGroupId="g", MessageDeduplicationId="d"
        )
        assert handle.drain("TurnQueue", timeout=60) == 1
    finally:
        handle.stop()


def test_five_long_turns_on_the_queue_each_get_an_invocation_of_their_own(resources, functions):
    # ST7: five 300 s turns in one batch outlived the 900 s function; now each turn is one
    # invocation with the whole budget, and other sessions' turns are not held in its batch.
    for n in range(5):
        _send(resources, "TurnQueue", [{"n": n}], group=f"t#a1#s{n}")
    Workers(functions, resources, retry_delay=0).drain("TurnQueue", timeout=60)
    calls = _calls(functions, "ChatFunction")
    assert [len(e["Records"]) for e in calls] == [1] * 5
    assert sorted(json.loads(e["Records"][0]["body"])["n"] for e in calls) == list(range(5))
