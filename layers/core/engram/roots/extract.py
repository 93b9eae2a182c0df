"""The extract function: one forced-tool model call per job; no agent tools, no prompt sections."""

from __future__ import annotations

from engram.kernel.settings import Settings
from engram.wiring.model import ModelDeps
from engram.wiring.stores import clients


def build(settings: Settings) -> ModelDeps:
    return ModelDeps(**clients(settings))
