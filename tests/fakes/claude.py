"""The Messages API as the anthropic SDK sees it over a mocked HTTP transport (httpx2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2

from engram.engine.providers.anthropic_provider import AnthropicProvider
from engram.kernel.settings import Settings


def reply(
    content: list[dict[str, Any]], *, stop: str = "end_turn", model: str = "claude-sonnet-4-6", **usage: int
) -> dict[str, Any]:
    """A Messages API answer body; `usage` defaults to 10 tokens in, 2 out."""
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 2},
    }


def recording(bodies: list[dict[str, Any]], answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A transport handler that keeps each request body and answers with `answer(body)`."""

    def handler(request: Any) -> Any:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx2.Response(200, json=answer(body))

    return handler


def provider(settings: Settings, handler: Any, cls: type[AnthropicProvider] = AnthropicProvider) -> AnthropicProvider:
    return cls(settings, http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
