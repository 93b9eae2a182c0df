"""Model providers behind one interface: Anthropic API, Amazon Bedrock, and a deterministic offline model."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings
    from ..agent.tools import ToolRegistry
    from .base import ModelProvider


def make_provider(settings: "Settings", registry: "ToolRegistry | None" = None) -> "ModelProvider":
    """Imports the anthropic SDK only for the providers that need it (it costs ~1.5 s)."""
    if settings.model_provider == "offline":
        from .offline import OfflineProvider

        return OfflineProvider(registry.offline_intents if registry else None)
    from .anthropic_provider import AnthropicProvider, BedrockProvider

    if settings.model_provider == "bedrock":
        return BedrockProvider(settings)
    return AnthropicProvider(settings)
