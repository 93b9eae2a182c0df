"""The one secret detector every write path uses (memory, facts, tools, extraction, run inputs, run
memory, learnings, session titles): the kernel's door to the rules, which live in a package of
their own (`engram.secrets`: normalising, known formats, statements, high-entropy tokens, and the
matcher over them). Importing this module imports nothing of them: the package (a hundred
compiled patterns, a fifth of the api function's own import) is imported on the first check, so
a cold start that serves a read never pays for it (SnapStart's hook imports it before the
snapshot: aws.snapstart)."""

from __future__ import annotations


def find_secret(text: str) -> str | None:
    from engram.secrets.matcher import find_secret

    return find_secret(text)


def find_secret_in_value(value: object) -> str | None:
    from engram.secrets.matcher import find_secret_in_value

    return find_secret_in_value(value)


def secret_values(text: str) -> set[str]:
    from engram.secrets.matcher import secret_values

    return secret_values(text)


def repeats_secret(text: str, values: set[str]) -> bool:
    from engram.secrets.matcher import repeats_secret

    return repeats_secret(text, values)


def redact(text: str) -> str:
    from engram.secrets.matcher import redact

    return redact(text)


__all__ = ["find_secret", "find_secret_in_value", "redact", "repeats_secret", "secret_values"]
