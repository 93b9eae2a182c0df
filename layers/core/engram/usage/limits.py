"""Spending limits (TL10): what is spent already (`Spend`, read once per turn from the usage
totals) and the guard a turn asks before each model call and before running tools.

A cost limit stops the turn before a model call when what is recorded, plus what the turn has
spent, plus what its last call cost (the next one re-sends that prompt and more) would pass it;
a first call is let through below the limit, so one call can pass a limit by its own cost, and
what comes after it is refused. Pure: no I/O (the read is the usage ledger's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from engram.kernel.errors import LimitExceeded
from engram.usage.models import Limits
from engram.usage.totals import next_day, next_month


@dataclass(frozen=True)
class Spend:
    """What the person and one agent have spent this UTC day and month (USD), as recorded, and
    the person's own limits; `day` is the day it was read for."""

    day: date
    agent_day: float = 0.0
    agent_month: float = 0.0
    user_day: float = 0.0
    user_month: float = 0.0
    user_limits: Limits | None = None


def _money(value: float) -> str:
    return f"${value:,.6f}".rstrip("0").rstrip(".")


class SpendGuard:
    """Asked by the tool loop: `before_call` before each model call (what this turn has spent
    so far and its last call's cost), `before_tools` before an answer's tool calls run."""

    def __init__(self, agent_limits: Limits | None, spend: Spend):
        self.agent_limits = agent_limits
        self.spend = spend

    @classmethod
    def of(cls, agent_limits: Limits | None, spend: Spend) -> SpendGuard | None:
        """The guard of a turn; None when no limit applies (the loop then asks nothing)."""
        guard = cls(agent_limits, spend)
        return guard if guard.active else None

    @property
    def active(self) -> bool:
        mine, user = self.agent_limits, self.spend.user_limits
        return any(
            v is not None
            for v in (
                mine and mine.daily_cost_usd,
                mine and mine.monthly_cost_usd,
                mine and mine.tool_calls_per_turn,
                user and user.daily_cost_usd,
                user and user.monthly_cost_usd,
            )
        )

    def _costs(self) -> list[tuple[str, str, float | None, float, str]]:
        """(scope, name, limit, recorded spend, resets at) of every cost limit."""
        s, mine, user = self.spend, self.agent_limits, self.spend.user_limits
        daily, monthly = next_day(s.day), next_month(s.day)
        return [
            ("agent", "dailyCostUsd", mine.daily_cost_usd if mine else None, s.agent_day, daily),
            ("agent", "monthlyCostUsd", mine.monthly_cost_usd if mine else None, s.agent_month, monthly),
            ("user", "dailyCostUsd", user.daily_cost_usd if user else None, s.user_day, daily),
            ("user", "monthlyCostUsd", user.monthly_cost_usd if user else None, s.user_month, monthly),
        ]

    def before_call(self, spent_usd: float, last_call_usd: float = 0.0) -> None:
        """Raises LimitExceeded when the next model call would pass a cost limit."""
        for scope, name, limit, recorded, resets in self._costs():
            if limit is None:
                continue
            total = recorded + spent_usd
            if total + last_call_usd > limit or total >= limit:
                whose = "the agent's" if scope == "agent" else "your"
                period = "daily" if name == "dailyCostUsd" else "monthly"
                raise LimitExceeded(
                    f"{whose} {period} spending limit of {_money(limit)} is reached ({_money(total)} spent); "
                    f"it resets at {resets}",
                    limit={"name": name, "scope": scope, "value": limit, "spentUsd": round(total, 8), "resetsAt": resets},
                )

    def before_tools(self, done: int, asked: int) -> None:
        """Raises LimitExceeded when running `asked` more tool calls after `done` passes the
        agent's toolCallsPerTurn: none of that answer's calls run."""
        cap = self.agent_limits.tool_calls_per_turn if self.agent_limits else None
        if cap is not None and done + asked > cap:
            raise LimitExceeded(
                f"the model asked for {asked} more tool call(s) after {done}; the agent's limit is {cap} per turn "
                "(none of them ran)",
                limit={"name": "toolCallsPerTurn", "scope": "agent", "value": cap},
            )
