"""A thin DynamoDB client wrapper: typed (de)serialisation, paging tokens, ClientError → domain errors."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any, Iterable, Iterator

from botocore.exceptions import ClientError

from engram.kernel.errors import BadRequest

_serializer = None
_deserializer = None


def _codecs():
    global _serializer, _deserializer
    if _serializer is None:
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        _serializer, _deserializer = TypeSerializer(), TypeDeserializer()
    return _serializer, _deserializer


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, set, tuple)):
        return [_from_dynamo(v) for v in value]
    return value


def serialize(item: dict[str, Any]) -> dict[str, Any]:
    ser, _ = _codecs()
    return {k: ser.serialize(v) for k, v in _to_dynamo(item).items()}


def serialize_value(value: Any) -> dict[str, Any]:
    ser, _ = _codecs()
    return ser.serialize(_to_dynamo(value))


def deserialize(item: dict[str, Any]) -> dict[str, Any]:
    _, de = _codecs()
    return _from_dynamo({k: de.deserialize(v) for k, v in item.items()})


def encode_token(last_key: dict[str, Any] | None) -> str | None:
    if not last_key:
        return None
    raw = json.dumps(deserialize(last_key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str | None, *, partition_attr: str, partition_value: str) -> dict[str, Any] | None:
    """A paging token is only accepted for the partition it came from (no hopping tenants)."""
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(key, dict) or key.get(partition_attr) != partition_value:
            raise ValueError("foreign partition")
        if not all(isinstance(v, str) for v in key.values()):
            raise ValueError("bad key")
    except (ValueError, TypeError, UnicodeDecodeError):
        raise BadRequest("nextToken is not a token this list issued", field="nextToken", code="invalid_token") from None
    return serialize(key)


def condition_failed(err: ClientError) -> bool:
    return err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def cancellation_codes(err: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction ("None" for items that were fine)."""
    if err.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    reasons = err.response.get("CancellationReasons") or []
    if not reasons:
        # Some emulators only put the reasons in the message: "[ConditionalCheckFailed, None]".
        msg = err.response.get("Error", {}).get("Message", "")
        if "[" in msg:
            return [r.strip() for r in msg[msg.index("[") + 1 : msg.rindex("]")].split(",")]
    return [r.get("Code", "None") for r in reasons]


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
