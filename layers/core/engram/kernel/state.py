"""Typed keys of a turn's per-feature state (`engine.tools.ToolContext.state`): the feature that
owns a piece of a turn's state declares its key, `RUN_MEMORY = StateKey[RunScratchpad]("run_memory")`,
and every read and write goes through it, so each value has one type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast


class StateKey[T]:
    """A typed key of `ToolContext.state`: the feature that owns a piece of a turn's state declares
    its key (`RUN_MEMORY = StateKey[RunScratchpad]("run_memory")`) and reads and writes it only here."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"

    def get(self, state: TurnState) -> T | None:
        return cast("T | None", state.get(self))

    def put(self, state: TurnState, value: T) -> None:
        state[self] = value

    def setdefault(self, state: TurnState, make: Callable[[], T]) -> T:
        if self not in state:
            state[self] = make()
        return cast("T", state[self])


# A turn's per-feature state: each value is written and read through its StateKey only.
type TurnState = dict[StateKey[Any], object]
