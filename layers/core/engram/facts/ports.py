"""Port of the user's facts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from engram.facts.models import Fact


class DuplicateText(Exception):
    """Another add claimed the same fact text first (`Facts.create`)."""


class Facts(Protocol):
    """Durable facts about the user, ranked for the prompt."""

    def item(self, tenant: str, f: Fact) -> dict[str, object]: ...

    def create(self, tenant: str, f: Fact, *, limit: int, replacing: str | None = None) -> None:
        """A new active fact claiming its text, within the tenant's `limit` of active facts
        (QuotaExceeded); DuplicateText when another add claimed the text first."""
        ...

    def put(
        self, tenant: str, f: Fact, *, expect_updated_at: str | None = None, was_active: bool | None = None, limit: int = 0
    ) -> None:
        """Replaces a fact read at `expect_updated_at`; archiving frees quota room, restoring takes it."""
        ...

    def put_reindexed(self, tenant: str, f: Fact, *, expect_updated_at: str, was_active: bool, limit: int) -> None:
        """An edit the duplicate check must see (new text, or restored), with its text's row."""
        ...

    def by_text(self, tenant: str, text: str) -> tuple[Fact | None, str | None, bool]: ...

    def index_texts(self, tenant: str) -> None: ...

    def get(self, tenant: str, fact_id: str) -> Fact | None: ...

    def all(self, tenant: str) -> list[Fact]: ...

    def top(self, tenant: str, limit: int) -> list[Fact]: ...

    def bump(self, tenant: str, facts: Iterable[Fact], when: str) -> None:
        """Marks injected facts as referenced: one transaction, Update-only (a concurrent edit of the
        text is never overwritten), skipped as a whole if one of them was archived meanwhile."""
        ...

    def delete_all(self, tenant: str) -> int: ...


class Profiles(Protocol):
    """The person's own name (`PATCH /api/me`, the sign-in token's `name` claim, or "my name is ...")."""

    def name(self, tenant: str) -> str | None: ...

    def set_name(self, tenant: str, name: str | None, *, only_if_unset: bool = False) -> bool:
        """Sets (None: removes) the name; `only_if_unset` leaves a name already set. Whether it changed."""
        ...
