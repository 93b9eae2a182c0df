"""API keys: the request body, the public resource, the grant the authorizer hands on, the key's form.

A key is `egk_` and 43 base64url characters (256 random bits). Only its SHA-256 is stored: the
key is random, so nobody can search the hash's preimage space (2^256) the way a password's is
searched; a slow, salted hash (bcrypt, scrypt, argon2) exists to make guessing low-entropy
passwords expensive and would only cost the authorizer time on every uncached request. An
unsalted hash also lets the authorizer find the key with one GetItem.
"""

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from engram.kernel.model import DATE_TIME_TEXT, Body, Resource

KEY_PREFIX = "egk_"
KEY_BYTES = 32  # 256 bits
KEY_CHARS = len(KEY_PREFIX) + 43  # base64url of 32 bytes without padding
HINT_CHARS = len(KEY_PREFIX) + 4  # what a list shows of a key: egk_AbCd
Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def looks_like_key(token: str) -> bool:
    return token.startswith(KEY_PREFIX) and len(token) == KEY_CHARS


class ApiKeyCreate(Body):
    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=2)] = ["read", "write"]
    # An ISO 8601 time with a zone, in the future; none: the key works until it is deleted.
    expires_at: Annotated[datetime, DATE_TIME_TEXT, Field(strict=False)] | None = None  # JSON has no datetime: from its text

    @field_validator("scopes")
    @classmethod
    def _unique(cls, scopes: list[Scope]) -> list[Scope]:
        return [s for s in SCOPES if s in scopes]

    @field_validator("expires_at", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        # pydantic would read a number as Unix seconds; the schema says an ISO 8601 string.
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an ISO 8601 time as text, e.g. 2030-01-01T00:00:00Z, not a number")
        return value

    @field_validator("expires_at")
    @classmethod
    def _future(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("must carry a time zone, e.g. 2030-01-01T00:00:00Z")
        if value <= datetime.now(UTC):
            raise ValueError("must be in the future")
        return value.astimezone(UTC)


class ApiKey(Resource):
    name: str
    scopes: list[str]
    hint: str  # the key's first characters, to tell keys apart: egk_AbCd
    expires_at: str | None = None
    last_used_at: str | None = None


class KeyGrant(BaseModel):
    """What a valid key lets its holder do: act as `sub` within `scopes`."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    sub: str
    key_id: str
    scopes: tuple[str, ...]
    expires_at: int | None = None  # epoch seconds
    last_used_at: int | None = None  # epoch seconds
