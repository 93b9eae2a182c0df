"""The local stack's pure pieces: template reading, routing, the emulated authorizer, event shapes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from local import gen_events
from local.apigw import authorize, build_http_event, lambda_to_http, load_functions
from local.resources import Resolver, Unresolvable, physical_name
from local.template import HttpRoute, load_template, load_yaml
from local.workers import failed_message_ids, sqs_record


def _routes_of(function_id: str, *routers) -> set[tuple[str, str]]:
    """(function, "METHOD /path") for every route of the routers that function serves."""
    out = set()
    for router in routers:
        for key in router._routes:
            rule, methods = key[0], key[1]
            path = rule.replace("<", "{").replace(">", "}")
            out |= {(function_id, f"{m.upper()} {path}") for m in methods}
    return out


def _expected_routes() -> set[tuple[str, str]]:
    from engram.account import routes as account
    from engram.agents import routes as agents
    from engram.apikeys import routes as api_keys
    from engram.approvals import routes as approvals
    from engram.cards import routes as cards
    from engram.connections import oauth_routes, probe_routes
    from engram.connections import routes as connections
    from engram.conversations import chat_routes
    from engram.conversations import routes as sessions
    from engram.facts import routes as facts
    from engram.health import routes as health
    from engram.mcp_server import routes as mcp
    from engram.memory import routes as memory
    from engram.recall import routes as recall
    from engram.runs import routes as runs
    from engram.streaming import routes as streaming
    from engram.usage import routes as usage

    api = (
        agents,
        sessions,
        recall,
        memory,
        facts,
        account,
        cards,
        runs,
        approvals,
        usage,
        connections,
        api_keys,
        mcp,
        streaming,
        health,
    )
    routes = _routes_of("ApiFunction", *(m.router for m in api)) | _routes_of(
        "ChatFunction", chat_routes.router, probe_routes.router, oauth_routes.router
    )
    return routes | {PREFLIGHT} | CONSOLE


# CORS preflights: no router route, powertools answers them from its CORS config (engram.api.http.cors_of).
PREFLIGHT = ("ApiFunction", "OPTIONS /{proxy+}")


# The console (engram.console.routes): its page, and its files under one API Gateway proxy route.
CONSOLE = {("ApiFunction", "GET /"), ("ApiFunction", "GET /console/{proxy+}")}

EXPECTED_ROUTES = _expected_routes()


@pytest.fixture(scope="module")
def template():
    return load_template()


@pytest.fixture(scope="module")
def functions(template, tmp_path_factory):
    # Handlers are imported lazily, so routing works without any code on disk.
    return load_functions(template, tmp_path_factory.mktemp("nocode"))


# --------------------------------------------------------------------------- YAML and template
def test_short_tags_become_long_form():
    doc = load_yaml(
        """
        A: !Ref Param
        B: !GetAtt Queue.Arn
        C: !GetAtt [Queue, QueueName]
        D: !Sub "${Table.Arn}/index/*"
        E: !If [Cond, !Ref X, !Ref AWS::NoValue]
        F: !Equals [!Ref P, ""]
        G: !Not [!Condition Other]
        H: !Select [0, !Split [",", "a,b"]]
        I: !Join ["-", [a, b]]
        J: !FindInMap [Map, !Ref AWS::Region, Key]
        K: !Sub ["${x}", {x: !Ref Y}]
        """
    )
    assert doc["A"] == {"Ref": "Param"}
    assert doc["B"] == {"Fn::GetAtt": ["Queue", "Arn"]}
    assert doc["C"] == {"Fn::GetAtt": ["Queue", "QueueName"]}
    assert doc["D"] == {"Fn::Sub": "${Table.Arn}/index/*"}
    assert doc["E"] == {"Fn::If": ["Cond", {"Ref": "X"}, {"Ref": "AWS::NoValue"}]}
    assert doc["F"] == {"Fn::Equals": [{"Ref": "P"}, ""]}
    assert doc["G"] == {"Fn::Not": [{"Condition": "Other"}]}
    assert doc["H"] == {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}
    assert doc["I"] == {"Fn::Join": ["-", ["a", "b"]]}
    assert doc["J"] == {"Fn::FindInMap": ["Map", {"Ref": "AWS::Region"}, "Key"]}
    assert doc["K"] == {"Fn::Sub": ["${x}", {"x": {"Ref": "Y"}}]}


def test_every_route_is_found_with_its_function(template):
    found = {(r.function_id, r.route_key) for r in template.routes()}
    assert found == EXPECTED_ROUTES


def test_only_the_webhook_cors_preflights_health_and_the_console_files_skip_the_jwt_authorizer(template):
    open_routes = sorted(r.route_key for r in template.routes() if r.auth_none)
    assert open_routes == [
        "DELETE /mcp",  # 405 to anyone (MX5)
        "GET /",
        "GET /.well-known/oauth-authorization-server",  # Engram's RFC 8414 metadata (MX4)
        "GET /.well-known/oauth-protected-resource",  # read before signing in (MX4)
        "GET /.well-known/oauth-protected-resource/mcp",
        # OAuth connections (TL9): the browser's return, authenticated by its one-time state, and
        # the client metadata document the authorization server fetches.
        "GET /api/connections/oauth/callback",
        "GET /api/connections/oauth/client-metadata.json",
        "GET /api/health",
        "GET /console/{proxy+}",
        "GET /mcp",  # 405 to anyone (MX5)
        "OPTIONS /{proxy+}",
        "POST /api/agents/{agentId}/webhook",
        "POST /api/oauth/register",  # RFC 7591 registration, public with a quota and a rate (MX4)
        "POST /mcp",  # checks its callers itself, so that its 401 names how to sign in (MX4)
    ]


def test_functions_carry_code_handler_timeout_and_queue_sources(template):
    api, chat = template.function("ApiFunction"), template.function("ChatFunction")
    assert (api.code_uri, api.handler, api.timeout, api.memory_size) == ("functions/api/", "app.lambda_handler", 15, 512)
    assert (chat.code_uri, chat.handler, chat.timeout, chat.memory_size) == ("functions/chat/", "app.lambda_handler", 900, 1024)
    assert api.sqs == ()
    (source,) = chat.sqs
    assert (source.queue_id, source.batch_size, source.report_failures) == ("TurnQueue", 1, True)
    assert template.layer_dirs() == ["layers/core/"]


def test_every_function_gets_the_global_environment(template):
    expected = {
        "TABLE_NAME",
        "BUCKET_NAME",
        "TURN_QUEUE_URL",
        "EXTRACT_QUEUE_URL",
        "MODEL_PROVIDER",
        "CHAT_MODEL",
        "EXTRACT_MODEL",
        "BEDROCK_MODEL_PREFIX",
        "ANTHROPIC_SECRET_ARN",
        "HISTORY_CAP",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_LOG_LEVEL",
    }
    for spec in template.functions():
        assert expected <= spec.environment.keys()


def test_turn_queue_visibility_is_six_times_the_chat_timeout(template):
    props = template.resources["TurnQueue"]["Properties"]
    assert props["VisibilityTimeout"] == 6 * template.function("ChatFunction").timeout


def test_resolver_follows_conditions_per_provider(template):
    secret = template.function_globals["Environment"]["Variables"]["ANTHROPIC_SECRET_ARN"]
    bedrock = Resolver(template, {}, region="us-east-1", parameters={"ModelProvider": "bedrock"})
    assert bedrock.resolve(secret) == ""
    given = Resolver(
        template,
        {},
        region="us-east-1",
        parameters={"AnthropicSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k"},
    )
    assert given.resolve(secret).endswith(":secret:k")
    # With the defaults the stack creates the secret, which does not exist locally.
    with pytest.raises(Unresolvable):
        Resolver(template, {}, region="us-east-1").resolve(secret)


def test_physical_names_are_valid_everywhere():
    assert physical_name("engram-local", "EngramTable") == "engram-local-engram-table"
    assert physical_name("engram-local", "TurnDLQ") == "engram-local-turn-dlq"
    assert physical_name("engram-local", "StateBucket") == "engram-local-state-bucket"


# --------------------------------------------------------------------------- routing
def test_route_keys_and_path_parameters(functions):
    route, params = functions.match("POST", "/api/agents/a1/sessions/dashboard/messages")
    assert route.route_key == "POST /api/agents/{agentId}/sessions/{sessionId}/messages"
    assert route.function_id == "ChatFunction"
    assert params == {"agentId": "a1", "sessionId": "dashboard"}
    route, params = functions.match("GET", "/api/agents")
    assert (route.route_key, params) == ("GET /api/agents", {})


def test_method_and_path_must_both_match(functions):
    assert functions.match("PUT", "/api/agents") is None
    assert functions.match("GET", "/api/agents/") is None
    assert functions.match("GET", "/api/unknown") is None
    # A parameter never spans a slash: a decoded %2F makes a path with one segment too many.
    assert functions.match("GET", "/api/agents/a/b") is None


def test_literal_segments_beat_parameters(tmp_path):
    template = load_template()
    extra = {
        "Type": "HttpApi",
        "Properties": {"ApiId": {"Ref": "HttpApi"}, "Method": "GET", "Path": "/api/agents/special"},
    }
    template.data["Resources"]["ApiFunction"]["Properties"]["Events"]["Special"] = extra
    fns = load_functions(template, tmp_path)
    route, params = fns.match("GET", "/api/agents/special")
    assert (route.path, params) == ("/api/agents/special", {})
    route, params = fns.match("GET", "/api/agents/other")
    assert (route.path, params) == ("/api/agents/{agentId}", {"agentId": "other"})


# --------------------------------------------------------------------------- authorizer
JWT_ROUTE = HttpRoute("ApiFunction", "ListAgents", "GET", "/api/agents", auth_none=False)
OPEN_ROUTE = HttpRoute("ChatFunction", "Webhook", "POST", "/api/agents/{agentId}/webhook", auth_none=True)


def test_dev_bearer_on_loopback_gives_claims():
    claims = authorize(JWT_ROUTE, {"authorization": "Bearer dev-alice_01"}, "127.0.0.1")
    scope = "aws.cognito.signin.user.admin"  # what the created pool's access tokens carry
    assert claims == {"sub": "alice_01", "via": "jwt", "iss": "engram-local", "token_use": "access", "scope": scope}
    assert authorize(JWT_ROUTE, {"authorization": "Bearer dev-bob"}, "::1") == {
        "sub": "bob",
        "via": "jwt",
        "iss": "engram-local",
        "token_use": "access",
        "scope": scope,
    }


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer alice",
        "Bearer dev-",
        "Bearer dev-al ice",
        "Bearer dev-a/b",
        "Basic dev-alice",
        "Bearer dev-" + "a" * 65,
        "dev-alice",
    ],
)
def test_bad_bearers_are_refused(header):
    headers = {"authorization": header} if header else {}
    assert authorize(JWT_ROUTE, headers, "127.0.0.1") is None


@pytest.mark.parametrize("ip", ["192.168.1.5", "10.0.0.1", "203.0.113.9", "not-an-ip"])
def test_non_loopback_callers_are_refused(ip):
    assert authorize(JWT_ROUTE, {"authorization": "Bearer dev-alice"}, ip) is None


def test_auth_none_routes_need_no_token():
    assert authorize(OPEN_ROUTE, {}, "203.0.113.9") == {}


# --------------------------------------------------------------------------- events and responses
def test_http_event_has_the_v2_shape():
    event = build_http_event(
        "GET /api/agents/{agentId}",
        "GET",
        "/api/agents/a b",
        raw_query="limit=5&tag=x&tag=y",
        headers=[("Host", "localhost:3000"), ("X-Custom", "1"), ("x-custom", "2"), ("Cookie", "a=1; b=2"), ("User-Agent", "ua")],
        path_params={"agentId": "a b"},
        claims={"sub": "alice", "iss": "engram-local", "token_use": "access"},
        source_ip="127.0.0.1",
    )
    assert event["version"] == "2.0"
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "GET /api/agents/{agentId}"
    assert event["rawPath"] == event["requestContext"]["http"]["path"] == "/api/agents/a b"
    assert event["rawQueryString"] == "limit=5&tag=x&tag=y"
    assert event["queryStringParameters"] == {"limit": "5", "tag": "x,y"}
    assert event["headers"] == {"host": "localhost:3000", "x-custom": "1,2", "user-agent": "ua"}
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["pathParameters"] == {"agentId": "a b"}
    ctx = event["requestContext"]
    assert ctx["stage"] == "$default" and ctx["domainName"] == "localhost"
    assert ctx["http"] == {
        "method": "GET",
        "path": "/api/agents/a b",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "ua",
    }
    assert ctx["authorizer"] == {"lambda": {"sub": "alice", "iss": "engram-local", "token_use": "access"}}
    assert isinstance(ctx["timeEpoch"], int) and ctx["requestId"]
    assert event["isBase64Encoded"] is False and "body" not in event


def test_optional_parts_are_absent_when_empty():
    event = build_http_event(
        "POST /api/agents/{agentId}/webhook",
        "POST",
        "/api/agents/a1/webhook",
        headers={"content-type": "application/json"},
        body=b'{"message":"hi"}',
    )
    for key in ("queryStringParameters", "pathParameters", "cookies"):
        assert key not in event
    assert "authorizer" not in event["requestContext"]
    assert (event["body"], event["isBase64Encoded"]) == ('{"message":"hi"}', False)


def test_non_text_bodies_are_base64():
    raw = b"a=1&b=2"
    event = build_http_event("POST /x", "POST", "/x", headers={"content-type": "application/x-www-form-urlencoded"}, body=raw)
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == raw


def test_v2_responses_become_http():
    resp = lambda_to_http(
        {"statusCode": 201, "headers": {"content-type": "application/json"}, "cookies": ["s=1"], "body": '{"ok":true}'}
    )
    assert (resp.status, resp.body) == (201, b'{"ok":true}')
    assert ("set-cookie", "s=1") in resp.headers
    binary = lambda_to_http({"statusCode": 200, "body": base64.b64encode(b"\x00\x01").decode(), "isBase64Encoded": True})
    assert binary.body == b"\x00\x01"
    simple = lambda_to_http({"message": "hi"})
    assert (simple.status, json.loads(simple.body), simple.header_dict()["content-type"]) == (
        200,
        {"message": "hi"},
        "application/json",
    )
    assert lambda_to_http("hello").body == b"hello"
    assert lambda_to_http({"statusCode": "nope"}).status == 500


# --------------------------------------------------------------------------- SQS events
def _message(mid: str, body: str = "{}", **attributes: str) -> dict:
    return {
        "MessageId": mid,
        "ReceiptHandle": f"rh-{mid}",
        "MD5OfBody": "x",
        "Body": body,
        "Attributes": {
            "SenderId": "S",
            "SentTimestamp": "1",
            "ApproximateReceiveCount": "2",
            "ApproximateFirstReceiveTimestamp": "2",
            **attributes,
        },
        "MessageAttributes": {"kind": {"StringValue": "chat", "DataType": "String"}},
    }


def test_sqs_record_has_lambdas_shape():
    record = sqs_record(
        _message("m1", '{"a":1}', MessageGroupId="g", MessageDeduplicationId="d", SequenceNumber="7"),
        "arn:aws:sqs:us-east-1:1:q.fifo",
        "us-east-1",
    )
    assert list(record) == [
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    ]
    assert list(record["attributes"]) == [
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
        "SequenceNumber",
        "MessageGroupId",
        "MessageDeduplicationId",
    ]
    assert record["messageAttributes"] == {
        "kind": {"stringValue": "chat", "stringListValues": [], "binaryListValues": [], "dataType": "String"}
    }
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == (
        "aws:sqs",
        "arn:aws:sqs:us-east-1:1:q.fifo",
        "us-east-1",
    )


def test_batch_item_failures_are_honoured_like_lambda():
    ids = ["a", "b", "c"]
    assert failed_message_ids(None, ids, True) == set()
    assert failed_message_ids({"batchItemFailures": []}, ids, True) == set()
    assert failed_message_ids({"batchItemFailures": [{"itemIdentifier": "b"}]}, ids, True) == {"b"}
    # Unknown or empty identifiers fail the whole batch.
    assert failed_message_ids({"batchItemFailures": [{"itemIdentifier": "zz"}]}, ids, True) == set(ids)
    assert failed_message_ids({"batchItemFailures": [{"itemIdentifier": ""}]}, ids, True) == set(ids)
    # Without ReportBatchItemFailures a returned value means the whole batch succeeded.
    assert failed_message_ids({"batchItemFailures": [{"itemIdentifier": "b"}]}, ids, False) == set()


# --------------------------------------------------------------------------- events/
def test_sample_events_are_generated_and_up_to_date(template):
    events_dir = Path(gen_events.EVENTS_DIR)
    generated = gen_events.generate(template)
    for must in (
        "api-post-agents.json",
        "chat-post-messages.json",
        "chat-post-webhook.json",
        "sqs-turn.json",
        "sqs-extract.json",
        "sqs-run.json",
        "sqs-failed-firing.json",
    ):
        assert must in generated
    assert len([n for n in generated if n.startswith(("api-", "chat-"))]) == len(EXPECTED_ROUTES)
    stale = [
        name
        for name, event in generated.items()
        if not (events_dir / name).exists() or (events_dir / name).read_text() != gen_events.render(event)
    ]
    assert not stale, f"run `python -m local.gen_events`: {stale}"


def test_sample_events_carry_the_documented_bodies(template):
    generated = gen_events.generate(template)
    turn = generated["sqs-turn.json"]["Records"][0]
    assert json.loads(turn["body"]) == {
        "runId": "r1",
        "tenant": "t",
        "agentId": "a1",
        "sessionId": "dashboard",
        "message": "hi",
        "kind": "chat",
    }
    assert {"MessageGroupId", "MessageDeduplicationId", "SequenceNumber"} <= turn["attributes"].keys()
    extract = generated["sqs-extract.json"]["Records"][0]
    assert json.loads(extract["body"]) == {"runId": "r1", "tenant": "t", "agentId": "a1", "sessionId": "dashboard"}
    assert "MessageGroupId" not in extract["attributes"]
    failed = json.loads(generated["sqs-failed-firing.json"]["Records"][0]["body"])
    assert failed["requestContext"]["condition"] == "RetriesExhausted"
    assert failed["requestPayload"] == generated["heartbeat-schedule.json"]  # the firing as the function got it
    assert failed["responsePayload"]["errorType"] == "SessionBusy"
    webhook = generated["chat-post-webhook.json"]
    assert {"x-engram-timestamp", "x-engram-signature"} <= webhook["headers"].keys()
    assert "authorizer" not in webhook["requestContext"]
    assert generated["api-post-agents.json"]["requestContext"]["authorizer"]["lambda"]["sub"] == "alice"
