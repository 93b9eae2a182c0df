"""The holder of one function's dependencies, kept by its app module."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from engram.aws import snapstart
from engram.kernel.settings import Settings, get_settings

T = TypeVar("T")


class FunctionRoot[T]:
    def __init__(self, build: Callable[[Settings], T]):
        self._build = build
        self._deps: T | None = None
        # With SnapStart on, environments resumed from one snapshot build their own dependencies.
        self.snapstart = snapstart.register(self.reset)

    @property
    def deps(self) -> T:
        """Built from the environment on first use, then kept for the container's life."""
        if self._deps is None:
            self._deps = self._build(get_settings())
        return self._deps

    def reset(self) -> None:
        """Drops the dependencies (clients, providers, their pools): built again on next use."""
        self._deps = None

    def use(self, deps: T | None) -> None:
        """Hands the function prebuilt dependencies (the tests, the local stack); None rebuilds."""
        self._deps = deps
