"""Validation shared by every write path: text lengths and the secret filter."""

from __future__ import annotations

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


def refuse_secret_value(field: str, value: Any) -> None:
    """The same for a JSON value (run inputs, run memory): names are read with their values."""
    from engram.kernel.secrets import find_secret_in_value

    kind = find_secret_in_value(value)
    if kind:
        raise secret_refused(field, kind)
