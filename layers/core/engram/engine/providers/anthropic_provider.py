"""Claude through the anthropic SDK: the Anthropic API (key from Secrets Manager) or Amazon Bedrock (IAM)."""

from __future__ import annotations

import os
from typing import Any

import anthropic

from engram.engine.providers.base import ModelResponse, TokenCounts
from engram.kernel.errors import ProviderError, TurnTimeout
from engram.kernel.settings import Settings


def _api_key(settings: Settings) -> str:
    if settings.anthropic_api_key:
        return settings.anthropic_api_key
    if not settings.anthropic_secret_arn:
        raise ProviderError("no Anthropic API key: set ANTHROPIC_API_KEY or ANTHROPIC_SECRET_ARN", code="model_not_configured")
    from aws_lambda_powertools.utilities import parameters

    # Cached per container for 5 minutes: a rotated key is picked up without a redeploy.
    secret = parameters.get_secret(settings.anthropic_secret_arn, max_age=300)
    key = secret.decode() if isinstance(secret, bytes) else str(secret)
    return key.strip()


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: Settings, client: Any = None, http_client: Any = None):
        self.settings = settings
        self._client = client
        self._http_client = http_client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        kwargs: dict[str, Any] = {
            "max_retries": self.settings.model_max_retries,  # the SDK backs off on 408/409/429/5xx/529
            "timeout": self.settings.model_timeout_s,
        }
        if self._http_client is not None:
            kwargs["http_client"] = self._http_client
        if self.settings.anthropic_base_url:
            kwargs["base_url"] = self.settings.anthropic_base_url
        return anthropic.Anthropic(api_key=_api_key(self.settings), **kwargs)

    def model_id(self, model: str) -> str:
        return model

    def complete(
        self,
        *,
        model: str,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        max_tokens: int,
        timeout: float,
        tool_choice: dict[str, Any] | None = None,
    ) -> ModelResponse:
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
        try:
            msg = self.client.with_options(timeout=timeout).messages.create(**kwargs)
        except anthropic.APITimeoutError as err:
            raise TurnTimeout(f"the model did not answer within {timeout:.0f}s") from err
        except anthropic.APIStatusError as err:
            raise ProviderError(f"the model provider answered {err.status_code}: {err.message}", code="model_error") from err
        except anthropic.APIConnectionError as err:
            raise ProviderError("the model provider could not be reached", code="model_unreachable") from err
        usage = msg.usage
        return ModelResponse(
            content=[block.model_dump(exclude_none=True, mode="json") for block in msg.content],
            stop_reason=msg.stop_reason or "end_turn",
            model=model,
            tokens=TokenCounts(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
                cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
            ),
        )


class BedrockProvider(AnthropicProvider):
    """Same Messages API through Bedrock: IAM credentials, no key."""

    name = "bedrock"

    def _make_client(self) -> Any:
        kwargs: dict[str, Any] = {"max_retries": self.settings.model_max_retries, "timeout": self.settings.model_timeout_s}
        if self._http_client is not None:
            kwargs["http_client"] = self._http_client
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return anthropic.AnthropicBedrock(aws_region=region, **kwargs)

    def model_id(self, model: str) -> str:
        if "anthropic." in model:
            return model
        return f"{self.settings.bedrock_model_prefix}{model}-v1:0"
