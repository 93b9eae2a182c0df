"""The secret filter: what it catches, and that its cost is linear whatever the text."""

from __future__ import annotations

import re

# re's parser is private API, but it is what compiles every pattern; the check below reads its tree.
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

from engram.kernel.secrets import _PATTERNS, find_secret

SECRETS = {
    "my password is hunter2!": "a password or secret",
    "api_key: sk_9f8e7d6c5b4a": "a password or secret",
    "postgres://bob:s3cretpw@db.internal/app": "a credential in a URL",
    "sk-ant-" + "a1" * 15: "an Anthropic API key",
    "token ghp_" + "A" * 36: "a GitHub token",
    "AKIAABCDEFGHIJKLMNOP": "an AWS access key id",
    "-----BEGIN RSA PRIVATE KEY-----": "a private key",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmn": "a JSON web token",
}
PLAIN = [
    "The user prefers short answers.",
    "secret: " * 2000,  # a keyword repeated, no value: the input that made the scan quadratic
    "https://example.com/docs:intro",
    "password policy is strict",
    "a" * 50_000,
]


@pytest.mark.parametrize("text", list(SECRETS))
def test_credentials_are_recognised(text):
    assert find_secret(text) == SECRETS[text]


@pytest.mark.parametrize("text", PLAIN, ids=range(len(PLAIN)))
def test_ordinary_text_passes(text):
    assert find_secret(text) is None


def _unbounded(tree: Any) -> list[str]:
    found = []
    for op, arg in tree:
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            low, high, inner = arg
            if high == sre_constants.MAXREPEAT:
                found.append(f"{{{low},}}")
            found += _unbounded(inner)
        elif op == sre_constants.SUBPATTERN:
            found += _unbounded(arg[-1])
        elif op == sre_constants.BRANCH:
            for branch in arg[1]:
                found += _unbounded(branch)
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            found += _unbounded(arg[1])
    return found


@pytest.mark.parametrize("label", [label for label, _ in _PATTERNS])
def test_every_repetition_is_bounded_so_a_scan_is_linear(label):
    pattern: re.Pattern[str] = dict(_PATTERNS)[label]
    assert _unbounded(sre_parse.parse(pattern.pattern, pattern.flags)) == []
