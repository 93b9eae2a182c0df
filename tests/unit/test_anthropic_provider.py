"""The real anthropic client over a mocked HTTP transport: request shapes, retries, errors."""

from __future__ import annotations

import json

import httpx2
import pytest

from engram.engine.providers.anthropic_provider import AnthropicProvider, BedrockProvider
from engram.kernel.errors import ProviderError
from engram.kernel.settings import Settings


def reply(text="hello", *, stop="end_turn", content=None, usage=None):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content or [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage
        or {"input_tokens": 120, "output_tokens": 7, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20},
    }


def provider_with(handler, **settings):
    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    s = Settings(ANTHROPIC_API_KEY="sk-test", MODEL_PROVIDER="anthropic", MODEL_MAX_RETRIES=2, **settings)
    return AnthropicProvider(s, http_client=client)


def test_request_carries_system_tools_and_history_in_sdk_shapes():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx2.Response(200, json=reply())

    provider = provider_with(handler)
    system = [{"type": "text", "text": "You are Ada.", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "get_current_time", "description": "now", "input_schema": {"type": "object", "properties": {}}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "what time is it?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_current_time", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00"}]},
    ]
    out = provider.complete(model="claude-sonnet-4-6", system=system, tools=tools, messages=messages, max_tokens=512, timeout=10)

    assert len(seen) == 1
    request = seen[0]
    assert request.url.path == "/v1/messages"
    assert request.headers.get("x-api-key") == "sk-test" or request.headers.get("authorization") == "Bearer sk-test"
    body = json.loads(request.content)
    assert body["system"] == system
    assert body["tools"] == tools
    assert body["messages"] == messages
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 512
    assert out.content == [{"type": "text", "text": "hello"}]
    assert out.stop_reason == "end_turn"
    assert (out.tokens.input_tokens, out.tokens.output_tokens, out.tokens.cache_read_tokens, out.tokens.cache_write_tokens) == (
        120,
        7,
        100,
        20,
    )


def test_tool_use_blocks_come_back_as_plain_dicts():
    content = [
        {"type": "text", "text": "checking"},
        {"type": "tool_use", "id": "toolu_9", "name": "get_current_time", "input": {}},
    ]
    provider = provider_with(lambda r: httpx2.Response(200, json=reply(content=content, stop="tool_use")))
    out = provider.complete(
        model="m", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
    )
    assert out.stop_reason == "tool_use"
    assert out.content == content


def test_overloaded_529_is_retried_then_succeeds():
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) == 1:
            return httpx2.Response(
                529,
                json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                headers={"retry-after-ms": "1"},
            )
        return httpx2.Response(200, json=reply("after retry"))

    out = provider_with(handler).complete(
        model="m", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
    )
    assert len(calls) == 2
    assert out.content[0]["text"] == "after retry"


@pytest.mark.parametrize("status", [429, 500, 529])
def test_failure_after_retries_is_a_provider_error(status):
    calls = []

    def handler(request):
        calls.append(request)
        return httpx2.Response(
            status, json={"type": "error", "error": {"type": "api_error", "message": "nope"}}, headers={"retry-after-ms": "1"}
        )

    with pytest.raises(ProviderError) as info:
        provider_with(handler).complete(
            model="m", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
        )
    assert len(calls) == 3  # first try + MODEL_MAX_RETRIES=2
    assert str(status) in info.value.message


def test_bad_request_is_not_retried():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx2.Response(400, json={"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})

    with pytest.raises(ProviderError):
        provider_with(handler).complete(
            model="m", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
        )
    assert len(calls) == 1


def test_bedrock_maps_model_names_to_inference_profiles():
    s = Settings(MODEL_PROVIDER="bedrock", BEDROCK_MODEL_PREFIX="eu.anthropic.")
    provider = BedrockProvider(s)
    assert provider.model_id("claude-sonnet-4-6") == "eu.anthropic.claude-sonnet-4-6-v1:0"
    assert provider.model_id("us.anthropic.claude-haiku-4-5-20251001-v1:0") == "us.anthropic.claude-haiku-4-5-20251001-v1:0"


@pytest.fixture
def bedrock_env(monkeypatch):
    """Credentials and a region for the Bedrock client (it signs its requests, never sends them)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def test_bedrock_request_goes_to_the_bedrock_invoke_endpoint(bedrock_env):
    seen = []

    def handler(request):
        seen.append(request)
        return httpx2.Response(200, json=reply("from bedrock"))

    s = Settings(MODEL_PROVIDER="bedrock")
    provider = BedrockProvider(s, http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    out = provider.complete(
        model="claude-sonnet-4-6", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
    )
    assert out.content[0]["text"] == "from bedrock"
    assert "bedrock-runtime.us-east-1" in seen[0].url.host
    assert seen[0].url.path.endswith("/model/us.anthropic.claude-sonnet-4-6-v1:0/invoke")
    assert seen[0].headers["authorization"].startswith("AWS4-HMAC-SHA256")


def test_with_on_text_the_answer_streams_and_comes_back_whole():
    from tests.fakes.claude import sse

    content = [
        {"type": "text", "text": "Let me look that up for you."},
        {"type": "text", "text": "One moment."},
        {"type": "tool_use", "id": "toolu_5", "name": "get_current_time", "input": {"zone": "UTC"}},
    ]
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return sse(reply(content=content, stop="tool_use"), piece=4)

    pieces: list[str] = []
    out = provider_with(handler).complete(
        model="m",
        system=[],
        tools=[],
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=10,
        timeout=5,
        on_text=pieces.append,
    )
    assert bodies[0]["stream"] is True
    assert len(pieces) > 3 and "".join(pieces) == "Let me look that up for you.\nOne moment."
    assert out.content == content and out.stop_reason == "tool_use"
    assert (out.tokens.input_tokens, out.tokens.cache_read_tokens) == (120, 100)


def test_without_on_text_nothing_streams():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=reply())

    provider_with(handler).complete(
        model="m", system=[], tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout=5
    )
    assert "stream" not in bodies[0]


def test_bedrock_streams_through_invoke_with_response_stream(bedrock_env):
    from tests.fakes.claude import bedrock_stream

    seen = []

    def handler(request):
        seen.append(request)
        return bedrock_stream(reply("streamed from bedrock"), piece=6)

    provider = BedrockProvider(
        Settings(MODEL_PROVIDER="bedrock"), http_client=httpx2.Client(transport=httpx2.MockTransport(handler))
    )
    pieces: list[str] = []
    out = provider.complete(
        model="claude-sonnet-4-6",
        system=[],
        tools=[],
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=10,
        timeout=5,
        on_text=pieces.append,
    )
    assert seen[0].url.path.endswith("/model/us.anthropic.claude-sonnet-4-6-v1:0/invoke-with-response-stream")
    assert len(pieces) > 1 and "".join(pieces) == "streamed from bedrock" == out.content[0]["text"]
