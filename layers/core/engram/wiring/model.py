"""The dependencies of the functions that call a model: Stores plus the tool registry, the prompt
sections and the provider (created on first use, so importing the SDK waits for a model call)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engram.engine.context import ContextSource
from engram.engine.events import TurnEvents
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
    # A session turn's context (the transcript's window, the running summary, the memory snapshot):
    # the conversations feature's (conversations.context), set by the roots that run turns.
    context_source: ContextSource | None = None
    provider_override: ModelProvider | None = None  # tests and benchmarks swap the model here
    # The events of a turn for whoever watches its session, (tenant, agent id, session id, run id)
    # -> events or None: the sockets of the WebSocket API (streaming.sink.watchers), set by the roots
    # that run turns; None here: no turn is watched.
    watch: Callable[[str, str, str, str], TurnEvents | None] | None = None
    _provider: ModelProvider | None = field(default=None, init=False, repr=False)

    def watchers(self, tenant: str, agent_id: str, session_id: str, run_id: str) -> TurnEvents | None:
        return None if self.watch is None else self.watch(tenant, agent_id, session_id, run_id)

    @property
    def provider(self) -> ModelProvider:
        if self.provider_override is not None:
            return self.provider_override
        if self._provider is None:
            self._provider = make_provider(self.settings, self.registry)
        return self._provider
