"""Validation shared by every write path: text lengths and the secret filter."""

from __future__ import annotations

from engram.kernel.errors import BadRequest, PayloadTooLarge
from engram.kernel.secrets import find_secret


def check_text(field: str, text: str, lo: int, hi: int) -> str:
    text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or len(text) < lo:
        raise BadRequest(f"{field} must be at least {lo} character(s)", field=field)
    if len(text) > hi:
        raise PayloadTooLarge(f"{field} is {len(text)} characters; the limit is {hi}", field=field, code="value_too_long")
    return text


def refuse_secrets(field: str, *texts: str | None) -> None:
    for text in texts:
        kind = find_secret(text or "")
        if kind:
            raise BadRequest(
                f"{field} looks like it contains {kind}; secrets are never stored in memory", field=field, code="secret_detected"
            )
