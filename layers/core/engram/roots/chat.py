"""The chat function: chat turns (sync, queued, webhooks) with the tools a chat turn can use."""

from __future__ import annotations

import functools
from typing import Unpack

from engram.cards.tools import register_tools as card_tools
from engram.connections.source import McpToolSource
from engram.engine.tools import ToolRegistry, default_registry
from engram.kernel.settings import Settings
from engram.memory.section import memory_sections
from engram.memory.tools import register_tools as memory_tools
from engram.recall.tools import register_tools as recall_tools
from engram.streaming.sink import watchers
from engram.wiring.model import ModelDeps
from engram.wiring.stores import ClientsGiven, clients


def chat_tools() -> ToolRegistry:
    """Built-ins, long-term memory and facts, conversation search, decision cards."""
    registry = default_registry()
    memory_tools(registry)
    recall_tools(registry)
    card_tools(registry)
    return registry


def build(settings: Settings, registry: ToolRegistry | None = None, **given: Unpack[ClientsGiven]) -> ModelDeps:
    deps = ModelDeps(
        **clients(settings, **given),
        registry=registry or chat_tools(),
        sections=memory_sections(
            settings.agent_memory_token_budget,
            workspace_rows=settings.workspace_memory_rows,
            user_fact_rows=settings.user_fact_rows,
        ),
    )
    deps.tool_sources.append(McpToolSource(deps))  # the agent's MCP connections (TL2)
    deps.watch = functools.partial(watchers, deps)  # the sockets watching a turn's session (ST2)
    return deps
