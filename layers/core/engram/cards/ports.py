"""Port of custom card types."""

from __future__ import annotations

from typing import Protocol

from engram.cards.models import CardType


class CardTypes(Protocol):
    """A tenant's custom card types (built-ins are data in cards.service)."""

    def put(self, tenant: str, card_type: CardType) -> None:
        """Replaces a stored card type."""
        ...

    def create(self, tenant: str, card_type: CardType, *, limit: int) -> None:
        """Stores a new card type within the tenant's `limit` of custom card types."""
        ...

    def get(self, tenant: str, name: str) -> CardType | None: ...

    def all(self, tenant: str) -> list[CardType]: ...

    def delete_all(self, tenant: str) -> int: ...
