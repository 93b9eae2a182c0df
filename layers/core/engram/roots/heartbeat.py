"""The heartbeat function: scheduled, manual, re-examination and council runs; a chat turn's
tools plus run memory and director learnings."""

from __future__ import annotations

from typing import Unpack

from engram.engine.tools import ToolRegistry
from engram.kernel.settings import Settings
from engram.roots import chat
from engram.run_memory.tools import register_tools as run_memory_tools
from engram.wiring.model import ModelDeps
from engram.wiring.stores import ClientsGiven


def run_tools() -> ToolRegistry:
    registry = chat.chat_tools()
    run_memory_tools(registry)
    return registry


def build(settings: Settings, **given: Unpack[ClientsGiven]) -> ModelDeps:
    return chat.build(settings, registry=run_tools(), **given)
