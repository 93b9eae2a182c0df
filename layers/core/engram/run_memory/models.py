"""Run memory entries (RM1): one namespaced key of one run's scratch store."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

Kind = Literal["input", "step_result", "task_result", "shared"]


class RunMemoryEntry(BaseModel):
    """One entry; camelCase in public (`createdAt`, `valueBytes`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, defer_build=True)

    key: str
    kind: Kind
    value: Any = None
    source: str | None = None
    title: str | None = None
    description: str | None = None
    created_at: str
    updated_at: str
    value_bytes: int = 0

    def public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, mode="json")

    def meta(self) -> dict[str, object]:
        """What memory_list shows: everything but the value."""
        return self.model_dump(by_alias=True, mode="json", exclude={"value"})
