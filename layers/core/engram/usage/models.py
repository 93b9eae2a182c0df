"""Token usage and its cost (`Usage`, per model call and summed per run), and usage rows: one per
model a run called, keyed by session for billing and listings."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body


class Usage(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    # What the cached tokens (reads and writes) would have cost as ordinary input, minus what they
    # cost: what the prompt cache saved (negative when writes were not read back).
    cache_savings_usd: float = 0.0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
            cache_savings_usd=round(self.cache_savings_usd + other.cache_savings_usd, 8),
        )


class UsageRow(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    id: str
    created_at: str
    agent_id: str
    session_key: str
    run_id: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    cache_savings_usd: float = 0.0

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


# What spent the tokens: a run's kind, or the job that worked for a run (TL10, OB4).
UsageKind = Literal["chat", "heartbeat", "manual", "council_member", "reexamination", "extraction", "summary"]
USAGE_KINDS: tuple[str, ...] = ("chat", "heartbeat", "manual", "council_member", "reexamination", "extraction", "summary")

# Sane maxima of a limit: a typo of a few zeros is refused, not stored.
MAX_COST_USD = 100_000.0
MAX_TOOL_CALLS_PER_TURN = 1_000
CostLimit = Annotated[float, Field(gt=0, le=MAX_COST_USD)]


class UserLimits(Body):
    """The person's spending limits over all their agents (PATCH /api/me `limits`); null: none."""

    daily_cost_usd: CostLimit | None = None
    monthly_cost_usd: CostLimit | None = None


class AgentLimits(UserLimits):
    """An agent's limits (TL10): what it may spend per UTC day and month, tool calls per turn."""

    tool_calls_per_turn: Annotated[int, Field(ge=1, le=MAX_TOOL_CALLS_PER_TURN)] | None = None


class Limits(AgentLimits):
    """Limits as stored and shown (an agent's, or the person's without `toolCallsPerTurn`)."""

    model_config = ConfigDict(strict=False, extra="ignore", validate_by_name=True)

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """The limits that are set: an absent one is no limit (also inside an agent's record)."""
        return {k: v for k, v in handler(self).items() if v is not None}

    def public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True)
