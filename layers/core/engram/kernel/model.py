"""The base shapes every feature's models share: strict request bodies, camelCase resources."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

from engram.kernel.errors import BadRequest
from engram.kernel.ids import ID_PATTERN

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
# Vocabulary shared by long-term memory and user facts.
Confidence = Literal["asserted", "inferred"]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=40)]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# defer_build: a model's validator is built on its first use, not at import, so a cold start pays
# only for the models its request touches (the api function imports every feature's models).
class Body(BaseModel):
    """Request bodies: camelCase on the wire, unknown fields are an error, not silently dropped,
    and JSON types are kept (strict: "yes" is not a boolean, "50" is not a number)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        extra="forbid",
        str_strip_whitespace=True,
        strict=True,
        defer_build=True,
    )


class Resource(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    id: str
    created_at: str
    updated_at: str

    def public(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


def changes_of(body: BaseModel, nullable: set[str]) -> dict[str, Any]:
    """The fields a PATCH body sets; only those in `nullable` may be cleared with null."""
    changes = body.model_dump(by_alias=True, exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    for name, value in changes.items():
        if value is None and name not in nullable:
            raise BadRequest(f"{name} cannot be null", field=name)
    return changes


def page(items: list[Any], token: str | None) -> dict[str, Any]:
    """A list response: `{items, nextToken}` with each item in its public shape."""
    return {"items": [i.public() if hasattr(i, "public") else i for i in items], "nextToken": token}
