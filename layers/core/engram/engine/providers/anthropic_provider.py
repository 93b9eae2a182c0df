"""Claude through the anthropic SDK: the Anthropic API (key from Secrets Manager) or Amazon Bedrock (IAM)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anthropic

from engram.aws.model_key import api_key, put_key_hint
from engram.engine.cache import bedrock_supports_1h
from engram.engine.providers.base import WEB_FETCH_BETA, ModelResponse, TokenCounts
from engram.kernel.errors import ModelNotConfigured, ProviderError, TurnTimeout
from engram.kernel.settings import Settings


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: Settings, client: object = None, http_client: object = None):
        self.settings = settings
        self._client = client
        self._injected = client is not None
        self._client_key: str | None = None
        self._http_client = http_client

    @property
    def client(self) -> Any:
        """Built once per key: the key is read on every call (cached 5 minutes by Parameters), and
        a rotated key builds a new client, so a container picks the new key up within 5 minutes."""
        if self._injected:
            return self._client
        key = self._key()
        if self._client is None or key != self._client_key:
            self._client, self._client_key = self._make_client(key), key
        return self._client

    def _key(self) -> str:
        return api_key(self.settings)

    def _make_client(self, key: str) -> object:
        kwargs: dict[str, Any] = {
            "max_retries": self.settings.model_max_retries,  # the SDK backs off on 408/409/429/5xx/529
            "timeout": self.settings.model_timeout_s,
        }
        if self._http_client is not None:
            kwargs["http_client"] = self._http_client
        if self.settings.anthropic_base_url:
            kwargs["base_url"] = self.settings.anthropic_base_url
        return anthropic.Anthropic(api_key=key, **kwargs)

    def _refused(self, err: anthropic.APIStatusError) -> ModelNotConfigured:
        """A 401/403 is a setup problem for whoever deployed the stack, not a failed turn."""
        return ModelNotConfigured(f"the Anthropic API refused the key ({err.status_code}): {put_key_hint(self.settings)}")

    def model_id(self, model: str) -> str:
        return model

    def cache_markers(
        self, model: str, system: list[dict[str, object]], messages: list[dict[str, object]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The markers as the API takes them: the Anthropic API takes the 1-hour TTL as it is
        (generally available: no beta header with this SDK)."""
        return system, messages

    def complete(
        self,
        *,
        model: str,
        system: list[dict[str, object]],
        tools: Sequence[Mapping[str, object]],
        messages: list[dict[str, object]],
        max_tokens: int,
        timeout: float,
        tool_choice: Mapping[str, object] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        system, messages = self.cache_markers(model, system, messages)
        kwargs: dict[str, Any] = {
            "model": self.model_id(model),
            "system": system,
            "messages": messages,
            "max_tokens": max_tokens,
        }
        if tools:
            kwargs["tools"] = tools
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
            if any(str(t.get("type", "")).startswith("web_fetch") for t in tools):
                kwargs["extra_headers"] = {"anthropic-beta": WEB_FETCH_BETA}
        try:
            client = self.client.with_options(timeout=timeout)
            msg = client.messages.create(**kwargs) if on_text is None else _streamed(client, kwargs, on_text)
        except anthropic.APITimeoutError as err:
            raise TurnTimeout(f"the model did not answer within {timeout:.0f}s") from err
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as err:
            raise self._refused(err) from err
        except anthropic.APIStatusError as err:
            raise ProviderError(f"the model provider answered {err.status_code}: {err.message}", code="model_error") from err
        except anthropic.APIConnectionError as err:
            raise ProviderError("the model provider could not be reached", code="model_unreachable") from err
        usage = msg.usage
        creation = getattr(usage, "cache_creation", None)
        return ModelResponse(
            content=[block.model_dump(exclude_none=True, mode="json") for block in msg.content],
            stop_reason=msg.stop_reason or "end_turn",
            model=model,
            tokens=TokenCounts(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
                cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
                cache_write_1h_tokens=getattr(creation, "ephemeral_1h_input_tokens", None) or 0,
                web_search_requests=getattr(getattr(usage, "server_tool_use", None), "web_search_requests", None) or 0,
            ),
        )


class BedrockProvider(AnthropicProvider):
    """Same Messages API through Bedrock: IAM credentials, no key."""

    name = "bedrock"

    def _key(self) -> str:
        return ""  # IAM: no key to read, the client is built once

    def _refused(self, err: anthropic.APIStatusError) -> ModelNotConfigured:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return ModelNotConfigured(
            f"Bedrock refused the model ({err.status_code}): enable access to the Claude models in the Bedrock console of "
            f"{region}, and check BEDROCK_MODEL_PREFIX (template parameter BedrockModelPrefix)"
        )

    def _make_client(self, key: str) -> object:
        kwargs: dict[str, Any] = {"max_retries": self.settings.model_max_retries, "timeout": self.settings.model_timeout_s}
        if self._http_client is not None:
            kwargs["http_client"] = self._http_client
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return anthropic.AnthropicBedrock(aws_region=region, **kwargs)

    def cache_markers(
        self, model: str, system: list[dict[str, object]], messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Bedrock takes the same markers; the 1-hour TTL only for some models: for the others the
        `ttl` is dropped, so the marker stays a 5-minute one rather than failing the request."""
        if bedrock_supports_1h(self.model_id(model)):
            return system, messages
        return [_five_minutes(b) for b in system], [
            {**m, "content": [_five_minutes(b) for b in m["content"]]} if isinstance(m.get("content"), list) else m
            for m in messages
        ]

    def model_id(self, model: str) -> str:
        if "anthropic." in model:
            return model
        return f"{self.settings.bedrock_model_prefix}{model}-v1:0"


def _streamed(client: Any, kwargs: Mapping[str, object], on_text: Callable[[str], None]) -> Any:
    """The SDK's streaming (server-sent events from the Anthropic API, the event stream of Bedrock's
    InvokeModelWithResponseStream): text to `on_text` as it comes, the whole message at the end."""
    texts = 0
    with client.messages.stream(**kwargs) as stream:
        for event in stream:
            if event.type == "content_block_start" and event.content_block.type == "text":
                if texts:
                    on_text("\n")
                texts += 1
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                on_text(event.delta.text)
        return stream.get_final_message()


def _five_minutes(block: dict[str, object]) -> dict[str, object]:
    marker = block.get("cache_control")
    if not isinstance(marker, dict) or "ttl" not in marker:
        return block
    return {**block, "cache_control": {k: v for k, v in marker.items() if k != "ttl"}}
