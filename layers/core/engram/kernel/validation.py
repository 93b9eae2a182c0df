"""Validation shared by every write path: text lengths, the secret filter, storable numbers."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from engram.kernel.errors import BadRequest, PayloadTooLarge


def check_text(field: str, text: str, lo: int, hi: int) -> str:
    text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or len(text) < lo:
        raise BadRequest(f"{field} must be at least {lo} character(s)", field=field)
    if len(text) > hi:
        raise PayloadTooLarge(f"{field} is {len(text)} characters; the limit is {hi}", field=field, code="value_too_long")
    return text


def secret_refused(field: str, kind: str) -> BadRequest:
    """The one answer to a write holding a secret: 400 secret_detected naming the field and the kind
    (never the text)."""
    return BadRequest(
        f"{field} looks like it contains {kind}; secrets are never stored in memory", field=field, code="secret_detected"
    )


def refuse_secrets(field: str, *texts: str | None) -> None:
    """BadRequest secret_detected if any text holds a secret; callers check lengths first."""
    from engram.kernel.secrets import find_secret

    for text in texts:
        kind = find_secret(text or "")
        if kind:
            raise secret_refused(field, kind)


def refuse_secret_value(field: str, value: object) -> None:
    """The same for a JSON value (run inputs, run memory): names are read with their values."""
    from engram.kernel.secrets import find_secret_in_value

    kind = find_secret_in_value(value)
    if kind:
        raise secret_refused(field, kind)


# DynamoDB's numbers: zero, or a magnitude from 1E-130 to 9.99...E+125, with at most 38 significant
# digits. Anything else is refused by DynamoDB (or by boto3 before it): checked here, once, for
# every request body and for every item written.
NUMBER_RANGE = "a number must be 0 or between 1e-130 and 1e126 in magnitude, with at most 38 significant digits"
_DIGITS_MAX = 38
_EXPONENT_MIN, _EXPONENT_MAX = -130, 125


def storable_number(value: int | float | Decimal) -> Decimal | None:
    """`value` exactly as DynamoDB stores it (trailing zeros dropped, so 10**50 is one digit), or
    None when DynamoDB cannot store it."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        number = Decimal(repr(value))
    else:
        number = Decimal(value)
    if not number.is_finite():
        return None
    if number.is_zero():
        return Decimal(0)
    sign, digits, exponent = number.as_tuple()
    kept = list(digits)
    while kept and kept[-1] == 0:
        kept.pop()
        exponent = int(exponent) + 1
    if len(kept) > _DIGITS_MAX or not _EXPONENT_MIN <= int(exponent) + len(kept) - 1 <= _EXPONENT_MAX:
        return None
    return Decimal((sign, tuple(kept), int(exponent)))


def unstorable_number(value: object, path: str = "") -> str | None:
    """The path (`inputs.a`, `fields.score.min`, `items.0`) of the first number in a JSON value
    that DynamoDB cannot store, or None. Walks iteratively: bodies nest at most 32 levels, items
    deeper (a model's tool input)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, (int, float, Decimal)):
            if storable_number(item) is None:
                return at or "body"
        elif isinstance(item, dict):
            stack.extend((v, f"{at}.{k}" if at else str(k)) for k, v in reversed(list(item.items())))
        elif isinstance(item, (list, tuple, set)):
            stack.extend((v, f"{at}.{i}" if at else str(i)) for i, v in reversed(list(enumerate(item))))
    return None


def refuse_unstorable_numbers(value: object, path: str = "") -> None:
    """BadRequest `number_out_of_range` naming the field of the first number DynamoDB cannot store."""
    field = unstorable_number(value, path)
    if field is not None:
        raise BadRequest(f"{field}: {NUMBER_RANGE}", field=field, code="number_out_of_range")
