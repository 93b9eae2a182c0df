"""The provider interface the agent loop talks to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class TokenCounts:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0  # every cache write, whatever its TTL
    cache_write_1h_tokens: int = 0  # the part of them written with the 1-hour TTL (priced 2x input)
    web_search_requests: int = 0  # Anthropic's server tool, billed per search


@dataclass(frozen=True)
class ModelResponse:
    content: list[dict[str, Any]]  # Anthropic content blocks as plain dicts
    stop_reason: str
    model: str
    tokens: TokenCounts = field(default_factory=TokenCounts)


class ModelProvider(Protocol):
    name: str

    def complete(
        self,
        *,
        model: str,
        system: list[dict[str, object]],
        tools: list[dict[str, object]],
        messages: list[dict[str, object]],
        max_tokens: int,
        timeout: float,
        tool_choice: dict[str, object] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        """The model's answer. With `on_text` the provider streams: each piece of text is handed
        to it as it arrives (a new text block after another starts with a newline, as the reply
        joins them), and the same whole answer is returned at the end."""
        ...


# Anthropic's server tools (TL6): run by the Anthropic API itself (not Bedrock); their blocks
# (server_tool_use and the *_tool_result after it) are stored and sent back as they came.
SERVER_TOOLS: dict[str, dict[str, Any]] = {
    "web_search": {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    "web_fetch": {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 5},
}
WEB_FETCH_BETA = "web-fetch-2025-09-10"
