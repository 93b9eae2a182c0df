"""The dependencies of the functions that call a model: Stores plus the tool registry, the prompt
sections and the provider (created on first use, so importing the SDK waits for a model call)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.engine.prompt import PromptSection
from engram.engine.providers import make_provider
from engram.engine.providers.base import ModelProvider
from engram.engine.tools import ToolRegistry, ToolSource
from engram.wiring.stores import Stores


@dataclass
class ModelDeps(Stores):
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    sections: list[PromptSection] = field(default_factory=list)
    # Tools beyond the registry an agent may have (its MCP connections), found per turn.
    tool_sources: list[ToolSource] = field(default_factory=list)
    provider_override: ModelProvider | None = None  # tests and benchmarks swap the model here
    _provider: ModelProvider | None = field(default=None, init=False, repr=False)

    @property
    def provider(self) -> ModelProvider:
        if self.provider_override is not None:
            return self.provider_override
        if self._provider is None:
            self._provider = make_provider(self.settings, self.registry)
        return self._provider
