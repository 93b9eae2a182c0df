"""The api function: CRUD over the repositories; never the engine, the tools or the model SDK."""

from __future__ import annotations

from engram.kernel.settings import Settings
from engram.wiring.stores import Stores, clients


def build(settings: Settings) -> Stores:
    return Stores(**clients(settings))
