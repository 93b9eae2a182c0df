"""The base shapes every feature's models share: strict request bodies, camelCase resources.

Modules that define models do not use `from __future__ import annotations`: pydantic would
evaluate every annotation string while building each class, on every cold start
(tests/unit/test_cold_start_imports.py)."""

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

from engram.kernel.errors import BadRequest
from engram.kernel.ids import ID_PATTERN

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
# Vocabulary shared by long-term memory and user facts.
Confidence = Literal["asserted", "inferred"]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=40)]


def json_types(*types: type, expected: str) -> BeforeValidator:
    """Refuses a value whose JSON type is not one of `types` before pydantic reads it: a Literal
    holding booleans takes 0 as False, and a lax datetime takes a number as epoch seconds; a strict
    body must do neither (bool is checked exactly: True is no int here)."""

    def check(value: object) -> object:
        if value is not None and type(value) not in types:
            raise ValueError(f"must be {expected}")
        return value

    return BeforeValidator(check)


# A date-time in a body: an ISO 8601 string only (JSON has no datetime type; a number is refused).
DATE_TIME_TEXT = json_types(str, expected="an ISO 8601 date-time string, e.g. 2030-01-01T00:00:00Z")


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

    def public(self) -> dict[str, object]:
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


def page(items: Sequence[object], token: str | None) -> dict[str, object]:
    """A list response: `{items, nextToken}` with each item in its public shape."""
    return {"items": [i.public() if hasattr(i, "public") else i for i in items], "nextToken": token}


def _bad_token() -> BadRequest:
    return BadRequest("nextToken is not a token this list issued", field="nextToken", code="invalid_token")


def page_ranked(
    rows: Sequence[object], rank: Callable[[Any], str], *, list_id: str, limit: int, token: str | None
) -> dict[str, Any]:
    """One page of a list kept in a computed order (the order no index holds: LT3's memory lists,
    facts active-first): the rows after the token's rank, at most `limit`. The token carries the
    last row's rank and the list it came from (a token of another list or tenant is a 400), so a
    row written or removed between pages never shifts the next page. Each rank must be unique."""
    after = _decode_rank(token, list_id) if token else None
    ordered = sorted(rows, key=rank)
    if after is not None:
        ordered = [r for r in ordered if rank(r) > after]
    items = ordered[:limit]
    nxt = None
    if len(ordered) > limit:
        raw = json.dumps({"l": list_id, "a": rank(items[-1])}, separators=(",", ":")).encode()
        nxt = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return page(items, nxt)


def _decode_rank(token: str, list_id: str) -> str:
    try:
        padded = token + "=" * (-len(token) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError, UnicodeDecodeError):
        raise _bad_token() from None
    if not isinstance(value, dict) or set(value) != {"l", "a"} or value["l"] != list_id:
        raise _bad_token()
    if not isinstance(value["a"], str) or not value["a"]:
        raise _bad_token()
    return value["a"]
