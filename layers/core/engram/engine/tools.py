"""The tool registry the agent loop runs; each feature registers its own tools.

A tool whose input is invalid answers the model with an error result (the model can correct
itself); a tool that raises is a crashed turn (history stays as it was).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from engram.agents.models import Agent
from engram.kernel.errors import EngramError, StorageUnavailable, ToolCrashed, aws_unavailable
from engram.kernel.observability import logger
from engram.kernel.secrets import repeats_secret, secret_values
from engram.kernel.settings import Settings
from engram.kernel.state import StateKey, TurnState
from engram.kernel.validation import secret_refused


class ToolDeps(Protocol):
    """What every tool may rely on in `ToolContext.deps` (wiring.Stores provides it, and TurnDeps
    extends it). A feature's tools reach their own stores through `wiring.stores.stores_of(ctx)`."""

    @property
    def settings(self) -> Settings: ...
    @property
    def executor(self) -> Executor: ...


@dataclass
class ToolContext:
    """What a tool may know about the turn it runs in."""

    tenant: str
    agent: Agent
    session_id: str
    run_id: str
    # The function's dependencies: settings and the pool here, each feature's stores through
    # `wiring.stores.stores_of(ctx)` (None only where a tool needs neither: some tests).
    deps: ToolDeps | None = None
    # Best-effort writes started during the turn (e.g. reference bumps); awaited before it returns.
    background: list[Future[Any]] = field(default_factory=list)
    # Per-feature state of this turn, set by the turn's plan and its policies (e.g. the card
    # policy's card, a run's memory); each feature reads its own key through its own accessor.
    state: TurnState = field(default_factory=dict)
    # Tools this agent reaches beyond the registry (its MCP connections), found for this turn.
    toolsets: list[ToolSet] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        if self.deps is None:
            raise TypeError("this tool context carries no dependencies")
        return self.deps.settings


# The user's message of the turn (ctx.state), so memory-writing tools can refuse a secret it holds
# even when the model writes it down without its keyword ("favourite number is 482913").
TURN_MESSAGE = StateKey[str]("turn_message")
_TURN_SECRETS = StateKey[set[str]]("turn_secret_values")


def refuse_secrets_of_the_turn(ctx: ToolContext, field: str, *texts: str | None) -> None:
    """BadRequest secret_detected if a text repeats a secret of the turn's user message (its values
    are found once per turn, on the first memory write)."""
    message = TURN_MESSAGE.get(ctx.state)
    if not message:
        return
    secrets = _TURN_SECRETS.setdefault(ctx.state, lambda: secret_values(message))
    for text in texts:
        if text and repeats_secret(text, secrets):
            raise secret_refused(field, "a secret from this conversation")


@dataclass(frozen=True)
class ToolOutcome:
    content: Any
    is_error: bool = False
    # What the run record shows of the call beside name, input and result (e.g. an MCP call's
    # connection, duration, bytes, error code, where its full result is kept).
    record: dict[str, Any] = field(default_factory=dict)


class ToolSet(Protocol):
    """Tools of one turn that live outside the registry (e.g. an agent's MCP servers)."""

    def specs(self) -> list[dict[str, object]]:
        """Tool definitions for the model, in a stable order."""
        ...

    def owns(self, name: str) -> bool: ...

    def call_many(self, uses: list[dict[str, object]], ctx: ToolContext, deadline: float) -> list[ToolOutcome]:
        """Runs the model's tool_use blocks (in parallel where it can), each ending by `deadline`
        (time.monotonic()); every failure is an is_error outcome, never an exception."""
        ...

    def close(self) -> None:
        """The turn ended: what the tools held open for it (e.g. MCP sessions) is closed."""
        ...


class ToolSource(Protocol):
    """Finds the ToolSet of a turn (None when the agent has none); runs beside the transcript read."""

    def toolset(self, ctx: ToolContext) -> ToolSet | None: ...


@dataclass
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    handler: Callable[[ToolContext, Any], Any]
    # The offline model's way to call this tool: user text -> tool input, or None.
    offline_intent: Callable[[str], dict[str, Any] | None] | None = None
    # Tools only some agents get (e.g. submit_result for agents with a card type): None = always.
    enabled: Callable[[ToolContext], bool] | None = None
    # An input schema built for the turn (e.g. from the agent's card type) instead of input_model's.
    schema_for: Callable[[ToolContext], dict[str, Any]] | None = None

    def available(self, ctx: ToolContext | None) -> bool:
        return self.enabled is None or (ctx is not None and self.enabled(ctx))

    def spec(self, ctx: ToolContext | None = None) -> dict[str, object]:
        if self.schema_for is not None and ctx is not None:
            schema = self.schema_for(ctx)
        else:
            schema = self.input_model.model_json_schema()
            schema.pop("title", None)
        return {"name": self.name, "description": self.description, "input_schema": schema}


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    def register(self, tool: Tool) -> Tool:
        self.tools[tool.name] = tool
        return tool

    def specs(self, enabled: Callable[[Tool], bool] | None = None, *, ctx: ToolContext | None = None) -> list[dict[str, object]]:
        """The tools offered to the model; with `ctx`, only those this agent gets, in their turn's shape."""
        return [t.spec(ctx) for t in self.tools.values() if (enabled is None or enabled(t)) and t.available(ctx)]

    def offline_intents(self) -> dict[str, Callable[[str], dict[str, Any] | None]]:
        return {name: t.offline_intent for name, t in self.tools.items() if t.offline_intent}

    def call(self, name: str, raw_input: object, ctx: ToolContext) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None or not tool.available(ctx):
            return ToolOutcome(f"unknown tool {name!r}", is_error=True)
        try:
            parsed = tool.input_model.model_validate(raw_input if isinstance(raw_input, dict) else {})
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in err.errors())
            return ToolOutcome(f"invalid input for {name}: {problems}", is_error=True)
        try:
            result = tool.handler(ctx, parsed)
        except EngramError as err:
            if err.status >= 500:
                raise ToolCrashed(f"tool {name} failed: {err.message}") from err
            return ToolOutcome(err.message, is_error=True)  # the model's mistake: it can correct it
        except Exception as err:  # a crashing tool fails the turn; the caller keeps history intact
            # The exception text (AWS errors carry ARNs and account ids) stays in the logs.
            logger.exception("a tool crashed", extra={"tool": name, "run_id": ctx.run_id})
            if aws_unavailable(err):
                raise StorageUnavailable(f"tool {name} could not reach the service's storage; retry shortly") from err
            raise ToolCrashed(f"tool {name} failed unexpectedly; the details are logged under the run id") from err
        if isinstance(result, ToolOutcome):
            return result
        return ToolOutcome(result)


# --- built-in tools -------------------------------------------------------------------------
class _NoInput(BaseModel):
    pass


def _current_time(_ctx: ToolContext, _input: _NoInput) -> dict[str, str]:
    now = datetime.now(UTC)
    return {"utc": now.isoformat(timespec="seconds").replace("+00:00", "Z"), "weekday": now.strftime("%A")}


def _time_intent(text: str) -> dict[str, object] | None:
    lowered = text.lower()
    return {} if ("what time" in lowered or "current time" in lowered or "what day" in lowered) else None


def default_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        Tool(
            name="get_current_time",
            description="Returns the current date and time in UTC. Use it whenever the answer depends on today's date or time.",
            input_model=_NoInput,
            handler=_current_time,
            offline_intent=_time_intent,
        )
    )
    return registry
