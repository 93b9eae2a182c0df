"""A stack whose model provider is not set up yet tells the person what to do (issue 13, items 3
and 4): a chat turn answers 503 model_not_configured naming the secret to fill, GET /api/health
says so without a token (and shows no secret), and a rotated key is used without a redeploy."""

from __future__ import annotations

import json
import os

import boto3
import httpx2
import pytest
from aws_lambda_powertools.utilities import parameters

from engram.engine.providers.anthropic_provider import AnthropicProvider
from engram.health.service import model_status
from engram.kernel.settings import Settings


@pytest.fixture(autouse=True)
def _fresh_parameter_cache():
    parameters.clear_caches()
    yield
    parameters.clear_caches()


def _reply(text: str) -> dict:
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def _anthropic(stack, secret_arn: str, handler) -> None:
    settings = stack.deps.settings.model_copy(
        update={
            "model_provider": "anthropic",
            "anthropic_api_key": "",
            "anthropic_secret_arn": secret_arn,
            "model_max_retries": 0,
        }
    )
    stack.deps.provider_override = AnthropicProvider(settings, http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    return settings


def _empty_secret() -> str:
    # What the template creates: a secret with no value until someone puts the key in it.
    return boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name="AnthropicApiKey-x1")["ARN"]


def test_an_empty_key_secret_is_a_503_naming_it_and_health_says_so(moto_stack):
    arn = _empty_secret()
    calls = []
    settings = _anthropic(moto_stack, arn, lambda request: calls.append(request) or httpx2.Response(200, json=_reply("hi")))
    agent = moto_stack.agent()
    r = moto_stack.say(agent["id"], "hello")
    assert r.status == 503 and r.error["code"] == "model_not_configured", r.body
    assert "AnthropicApiKey-x1" in r.error["message"] and "put-secret-value" in r.error["message"]
    assert calls == []  # the model was never called
    run = moto_stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "model_not_configured"
    session = moto_stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["messages"] == []  # nothing of the failed turn is kept

    status = model_status(settings)
    assert status["status"] == "needs_setup" and status["model"]["configured"] is False
    assert "AnthropicSecretArn" in status["model"]["nextStep"] and arn not in json.dumps(status)

    boto3.client("secretsmanager", region_name="us-east-1").put_secret_value(SecretId=arn, SecretString="sk-ant-real")
    parameters.clear_caches()  # (the key is cached 5 minutes per container)
    assert model_status(settings)["status"] == "ok"
    assert moto_stack.say(agent["id"], "hello again").status == 200


def test_a_rotated_key_builds_a_new_client(moto_stack):
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    arn = secrets.create_secret(Name="AnthropicApiKey-x2", SecretString="sk-ant-one")["ARN"]
    keys = []

    def handler(request):
        keys.append(request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer "))
        return httpx2.Response(200, json=_reply("ok"))

    _anthropic(moto_stack, arn, handler)
    agent = moto_stack.agent()
    assert moto_stack.say(agent["id"], "one").status == 200
    assert moto_stack.say(agent["id"], "two").status == 200
    secrets.put_secret_value(SecretId=arn, SecretString="sk-ant-two")
    parameters.clear_caches()  # as 5 minutes later, when the cached value expires
    assert moto_stack.say(agent["id"], "three").status == 200
    assert keys == ["sk-ant-one", "sk-ant-one", "sk-ant-two"]


def test_a_refused_key_is_model_not_configured_not_a_failed_turn_of_the_users(moto_stack):
    arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name="AnthropicApiKey-x3", SecretString="sk-bad")[
        "ARN"
    ]
    refused = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    _anthropic(moto_stack, arn, lambda request: httpx2.Response(401, json=refused))
    r = moto_stack.say(moto_stack.agent()["id"], "hello")
    assert r.status == 503 and r.error["code"] == "model_not_configured"
    assert "refused the key (401)" in r.error["message"]


def test_health_needs_no_token_and_the_offline_model_is_ready(stack):
    r = stack.call("GET", "/api/health", user=None)
    assert r.status == 200
    assert r.data == {
        "status": "ok",
        "model": {"provider": "offline", "chatModel": stack.deps.settings.chat_model, "configured": True, "nextStep": None},
    }


@pytest.mark.parametrize("given", ["", "antropic"])
def test_a_deployed_function_without_a_provider_refuses_turns_naming_the_setting(stack, given):
    # As Lambda runs it: the function is named, MODEL_PROVIDER unset or a name that is none.
    deployed = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": "engram-ChatFunction", "MODEL_PROVIDER": given}
    stack.deps.settings = Settings.from_env(deployed)
    agent = stack.agent()
    r = stack.say(agent["id"], "hello")
    assert r.status == 503 and r.error["code"] == "model_not_configured", r.body
    assert "MODEL_PROVIDER" in r.error["message"]
    run = stack.call("GET", f"/api/runs/{r.error['runId']}").data
    assert run["status"] == "failed" and run["error"]["code"] == "model_not_configured"
    assert stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data["messages"] == []
    health = stack.call("GET", "/api/health", user=None)
    assert health.status == 503 and "MODEL_PROVIDER" in health.error["message"]


def test_only_the_local_stack_and_tests_default_to_the_offline_model():
    assert Settings.from_env({}).model_provider == "offline"  # tests, the local stack (it also sets it)
    assert Settings.from_env({"AWS_LAMBDA_FUNCTION_NAME": "f", "AWS_SAM_LOCAL": "true"}).model_provider == "offline"
    assert Settings.from_env({"AWS_LAMBDA_FUNCTION_NAME": "f"}).model_provider is None
    assert Settings.from_env({"AWS_LAMBDA_FUNCTION_NAME": "f", "MODEL_PROVIDER": "bedrock"}).model_provider == "bedrock"
    with pytest.raises(ValueError, match="MODEL_PROVIDER"):
        Settings.from_env({"MODEL_PROVIDER": "antropic"})  # a typo outside Lambda stops the process at start
