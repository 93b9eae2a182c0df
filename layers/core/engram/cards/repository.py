"""Custom card types, in the tenant's partition (built-ins are data in cards.service)."""

from __future__ import annotations

from engram.aws import keys
from engram.aws.table import Table
from engram.cards.models import CardType


class CardTypeRepository:
    def __init__(self, table: Table):
        self.table = table

    def put(self, t: str, card_type: CardType) -> None:
        self.table.put(
            {"PK": keys.tenant_pk(t), "SK": keys.card_type_sk(card_type.name), **card_type.model_dump(by_alias=True, mode="json")}
        )

    def get(self, t: str, name: str) -> CardType | None:
        item = self.table.get(keys.tenant_pk(t), keys.card_type_sk(name))
        return CardType.model_validate(item) if item else None

    def page(self, t: str, *, limit: int, token: str | None) -> tuple[list[CardType], str | None]:
        items, nxt = self.table.query(keys.tenant_pk(t), sk_prefix="CARDTYPE#", limit=limit, token=token)
        return [CardType.model_validate(i) for i in items], nxt

    def all(self, t: str) -> list[CardType]:
        return [CardType.model_validate(i) for i in self.table.query_all(keys.tenant_pk(t), sk_prefix="CARDTYPE#")]

    def delete_all(self, t: str) -> int:
        return self.table.delete_all(keys.tenant_pk(t), sk_prefix="CARDTYPE#")
