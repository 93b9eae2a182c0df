"""Model providers behind one interface: Anthropic API, Amazon Bedrock, and a deterministic offline model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.engine.providers.base import ModelResponse
from engram.kernel.errors import ModelNotConfigured
from engram.kernel.settings import PROVIDER_NOT_SET

if TYPE_CHECKING:
    from engram.engine.providers.base import ModelProvider
    from engram.engine.tools import ToolRegistry
    from engram.kernel.settings import Settings


def make_provider(settings: Settings, registry: ToolRegistry | None = None) -> ModelProvider:
    """Imports the anthropic SDK only for the providers that need it (it costs ~1.5 s). Without a
    provider (a deployed function whose MODEL_PROVIDER names none) every call is refused."""
    if settings.model_provider is None:
        return Unconfigured()
    if settings.model_provider == "offline":
        from engram.engine.providers.offline import OfflineProvider

        return OfflineProvider(registry.offline_intents if registry else None)
    from engram.engine.providers.anthropic_provider import AnthropicProvider, BedrockProvider

    if settings.model_provider == "bedrock":
        return BedrockProvider(settings)
    return AnthropicProvider(settings)


def preload(settings: Settings) -> None:
    """Imports the anthropic SDK now, during the function's init, when the model is Claude: the
    SDK's own package import (its types, every resource, the Bedrock and Vertex clients) cannot
    be narrowed from outside, so the choice is when to pay it. In init it is off the first
    request's latency (and inside what provisioned concurrency or SnapStart capture)."""
    if settings.model_provider in ("anthropic", "bedrock"):
        import engram.engine.providers.anthropic_provider  # noqa: F401


class Unconfigured:
    """The provider of a deployed function whose MODEL_PROVIDER names none: each call is a 503
    model_not_configured naming the setting (never the offline model's made-up answers)."""

    name = "unconfigured"

    def complete(self, **_: object) -> ModelResponse:
        raise ModelNotConfigured(PROVIDER_NOT_SET)
