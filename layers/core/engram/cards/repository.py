"""Custom card types, in the tenant's partition (built-ins are data in cards.service)."""

from __future__ import annotations

from engram.aws import keys, quotas
from engram.aws.table import ConditionFailed, Table
from engram.cards.models import CardType
from engram.kernel.errors import Conflict


class CardTypeRepository:
    def __init__(self, table: Table):
        self.table = table

    def _item(self, tenant: str, card_type: CardType) -> dict[str, object]:
        return {
            "PK": keys.tenant_pk(tenant),
            "SK": keys.card_type_sk(card_type.name),
            **card_type.model_dump(by_alias=True, mode="json"),
        }

    def put(self, tenant: str, card_type: CardType) -> None:
        """Replaces a stored card type."""
        self.table.put(self._item(tenant, card_type))

    def create(self, tenant: str, card_type: CardType, *, limit: int) -> None:
        """Writes a new card type within the tenant's `limit`; a 409 if one was stored meanwhile."""
        try:
            quotas.create_within(
                self.table,
                [self.table.put_op(self._item(tenant, card_type), condition="attribute_not_exists(PK)")],
                quotas.card_types(tenant, limit),
            )
        except ConditionFailed:
            raise Conflict(
                f"card type {card_type.name} was created meanwhile; retry to replace it", field="name", code="card_type_changed"
            ) from None

    def get(self, tenant: str, name: str) -> CardType | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.card_type_sk(name))
        return CardType.model_validate(item) if item else None

    def all(self, tenant: str) -> list[CardType]:
        return [CardType.model_validate(i) for i in self.table.query_all(keys.tenant_pk(tenant), sk_prefix="CARDTYPE#")]

    def delete_all(self, tenant: str) -> int:
        deleted = self.table.delete_all(keys.tenant_pk(tenant), sk_prefix="CARDTYPE#")
        quotas.forget(self.table, quotas.card_types(tenant))
        return deleted
