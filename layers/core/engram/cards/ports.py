"""Ports of custom card types, and what the decisions read of the runs and agents (typed here by
shape: the card types know nothing of runs or agents, which import them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engram.cards.models import CardedRun, CardType


class CardTypes(Protocol):
    """A tenant's custom card types (built-ins are data in cards.service)."""

    def put(self, tenant: str, card_type: CardType) -> None:
        """Replaces a stored card type."""
        ...

    def create(self, tenant: str, card_type: CardType, *, limit: int) -> None:
        """Writes a new card type within the tenant's `limit` of custom card types."""
        ...

    def get(self, tenant: str, name: str) -> CardType | None: ...

    def all(self, tenant: str) -> list[CardType]: ...

    def delete_all(self, tenant: str) -> int: ...


class CardedRuns(Protocol):
    """An agent's runs whose result holds a card, newest first (runs.ports.RunDecisions)."""

    def recent_with_cards(self, tenant: str, agent_id: str, *, limit: int) -> Sequence[CardedRun]: ...

    def with_cards_page(
        self, tenant: str, agent_id: str, *, limit: int, token: str | None
    ) -> tuple[Sequence[CardedRun], str | None]:
        """One page (it may be short: each reads a bounded number of runs) and the next page's token."""
        ...


class AgentLookup(Protocol):
    """Whether an agent exists for the tenant (agents.ports.Agents)."""

    def get(self, tenant: str, agent_id: str) -> object | None: ...
