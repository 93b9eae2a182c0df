"""Ids: validated before they reach a DynamoDB key or an S3 path, generated sortable."""

from __future__ import annotations

import hashlib
import os
import re
import time

from engram.kernel.errors import BadRequest

ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# Every agent has this session, created with it; chat and Active Memory runs share it.
DASHBOARD = "dashboard"
_ID_RE = re.compile(ID_PATTERN)
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def check_id(field: str, value: object) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise BadRequest(f"{field} must match [A-Za-z0-9_-]{{1,64}}", field=field, code="invalid_id")
    return value


def time_ordered_id(prefix: str, ms: int, tail: bytes) -> str:
    """`<prefix>_` + 10 Crockford characters of the millisecond time + 16 of `tail` (10 bytes)."""
    stamp = "".join(_CROCKFORD[(ms >> shift) & 31] for shift in range(45, -5, -5))
    rand = int.from_bytes(tail, "big")
    return prefix + "_" + stamp + "".join(_CROCKFORD[(rand >> shift) & 31] for shift in range(75, -5, -5))


def new_id(prefix: str) -> str:
    """Time-ordered (ULID-like) so lists sort by creation without another index."""
    return time_ordered_id(prefix, int(time.time() * 1000), os.urandom(10))


def tenant_key(sub: str) -> str:
    """The principal's tenant as it appears in keys and S3 paths.

    JWT `sub` values may contain characters unsafe for paths (`auth0|123`), so keys use a hash.
    """
    if not isinstance(sub, str) or not sub or len(sub) > 512:
        raise BadRequest("the token has no usable subject", code="invalid_principal")
    return "t" + hashlib.sha256(sub.encode()).hexdigest()[:31]
