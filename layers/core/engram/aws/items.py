"""DynamoDB items as Python values and back: the one place numbers become DynamoDB numbers
(exactly, or a 400 naming the attribute), paging tokens bound to their partition, and update
expressions. `aws.table.Table` and the repositories that build their own requests use it."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from engram.kernel.errors import BadRequest
from engram.kernel.observability import logger
from engram.kernel.validation import refuse_unstorable_numbers, storable_number

_INT_DIGITS = 38  # boto3 refuses an int of more digits (10**50 is stored as the Decimal 1E+50)
_serializer: Any = None
_deserializer: Any = None


def _codecs() -> tuple[Any, Any]:
    global _serializer, _deserializer
    if _serializer is None:
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        class Deserializer(TypeDeserializer):  # type: ignore[misc]
            """Numbers as DynamoDB sends them: 1E+100 arrives as 101 digits, which boto3's own
            38-digit context refuses (decimal.Rounded) although DynamoDB stored it (boto3 #2500)."""

            def _deserialize_n(self, value: str) -> Decimal:
                return Decimal(value)

            def _deserialize_ns(self, value: list[str]) -> set[Decimal]:
                return {Decimal(v) for v in value}

        _serializer, _deserializer = TypeSerializer(), Deserializer()
    return _serializer, _deserializer


def _to_dynamo(value: object, path: str = "") -> Any:
    """The one place numbers become DynamoDB numbers: exactly, or a 400 naming the attribute
    (`number_out_of_range`) when DynamoDB cannot store one, never a decimal error from boto3."""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        number = storable_number(value)
        if number is None:
            refuse_unstorable_numbers(value, path)
        return value if isinstance(value, int) and abs(value) < 10**_INT_DIGITS else number
    if isinstance(value, dict):
        return {k: _to_dynamo(v, f"{path}.{k}" if path else str(k)) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(value)]
    return value


def _from_dynamo(value: object) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, set, tuple)):
        return [_from_dynamo(v) for v in value]
    return value


def serialize(item: Mapping[str, object]) -> dict[str, object]:
    ser, _ = _codecs()
    return {k: ser.serialize(v) for k, v in _to_dynamo(item).items()}


def deserialize(item: Mapping[str, object]) -> dict[str, Any]:
    """An item as Python values. An attribute that cannot be read (a malformed value an emulator
    or an old write left) is left out and logged, so one bad value never breaks every reader."""
    _, de = _codecs()
    values: dict[str, Any] = {}
    for name, value in item.items():
        try:
            values[name] = de.deserialize(value)
        except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError):
            logger.error("an attribute of a stored item could not be read; left out", extra={"attribute": name})
    out: dict[str, Any] = _from_dynamo(values)
    return out


def encode_token(last_key: Mapping[str, object] | None) -> str | None:
    if not last_key:
        return None
    raw = json.dumps(deserialize(last_key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(
    token: str | None, *, partition_attr: str, partition_value: str, key_attrs: frozenset[str] = frozenset({"PK", "SK"})
) -> dict[str, Any] | None:
    """A paging token is only accepted for the partition it came from (no hopping tenants), and
    only in the shape the query issues: exactly its key attributes, each a non-empty string."""
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(key, dict) or key.get(partition_attr) != partition_value:
            raise ValueError("foreign partition")
        if set(key) != key_attrs or not all(isinstance(v, str) and v for v in key.values()):
            raise ValueError("bad key")
    except (ValueError, TypeError, UnicodeDecodeError):
        raise BadRequest("nextToken is not a token this list issued", field="nextToken", code="invalid_token") from None
    return serialize(key)


def set_expression(changes: Mapping[str, object]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """SET/REMOVE expression for `changes` (None removes the attribute)."""
    sets, removes, names, values = [], [], {}, {}
    for i, (attr, value) in enumerate(changes.items()):
        names[f"#a{i}"] = attr
        if value is None:
            removes.append(f"#a{i}")
        else:
            sets.append(f"#a{i} = :v{i}")
            values[f":v{i}"] = value
    expr = ("SET " + ", ".join(sets) if sets else "") + (" REMOVE " + ", ".join(removes) if removes else "")
    return expr.strip(), names, values
