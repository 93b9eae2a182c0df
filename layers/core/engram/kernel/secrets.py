"""Refuses values that look like credentials, on every write path (REST, tools, extraction).

Memory is injected into prompts and exported; a secret stored there leaks. The patterns favour
precision on well-known token shapes plus "password/secret/api key is ..." statements.

Every repetition is bounded (a test checks it): a pattern's work at one position is then at most
its bound, so a scan is linear in the text's length whatever the text (an unbounded `+` after a
keyword that repeats, "secret:secret:secret:...", made it quadratic). Callers check sizes first.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
    ("an AWS secret access key", re.compile(r"(?i)aws.{0,20}(?:secret|key).{0,20}[=:\s][\"']?[A-Za-z0-9/+=]{40}\b")),
    ("an Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20}")),
    ("an API key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20}")),
    ("a Stripe key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,2000}\.eyJ[A-Za-z0-9_-]{10,4000}\.[A-Za-z0-9_-]{10}")),
    ("a credential in a URL", re.compile(r"\b[a-z][a-z0-9+.-]{0,30}://[^/\s:@]{1,256}:[^/\s:@]{3,256}@", re.I)),
    (
        "a password or secret",
        re.compile(
            r"(?i)\b(?:password|passwd|passphrase|pwd|api[ _-]?key|secret[ _-]?key|client[ _-]?secret|access[ _-]?token|auth[ _-]?token|secret)"
            r"\s{0,8}(?:is|was|=|:|->)\s{0,8}[\"']?(?!\s)(?=[^\s\"']{0,256}[0-9!@#$%^&*_\-+=])[^\s\"']{6}"
        ),
    ),
]


def find_secret(text: str) -> str | None:
    """What kind of secret `text` seems to hold, or None."""
    for label, pattern in _PATTERNS:
        if pattern.search(text):
            return label
    return None
