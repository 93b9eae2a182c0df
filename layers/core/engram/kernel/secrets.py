"""The one secret detector every write path uses (memory, facts, tools, extraction, run inputs, run
memory, learnings, session titles): the kernel's door to the rules, which live in a package of
their own (`engram.secrets`: normalising, known formats, statements, high-entropy tokens, and the
matcher over them). Importing this module builds nothing: the rules, detect-secrets' plugins and
the confusables table are built on the first check."""

from __future__ import annotations

from engram.secrets.matcher import find_secret, find_secret_in_value, redact, repeats_secret, secret_values

__all__ = ["find_secret", "find_secret_in_value", "redact", "repeats_secret", "secret_values"]
