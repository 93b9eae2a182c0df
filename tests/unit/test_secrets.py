"""The secret detector: what it catches (a corpus with its recall and false-positive rate), what it
lets through, and that its cost is linear whatever the text."""

from __future__ import annotations

import json
import re
from pathlib import Path

# re's parser is private API, but it is what compiles every pattern; the check below reads its tree.
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

from engram.kernel import secrets
from engram.kernel.secrets import entropy, find_secret, find_secret_in_value, normalise, repeats_secret, secret_values

# Made-up values shaped like the real ones; none of them is a credential anywhere.
CORPUS = json.loads((Path(__file__).parent / "data" / "secret_corpus.json").read_text())
POSITIVES: list[dict[str, str]] = CORPUS["positives"]
NEGATIVES: list[str] = [n["text"] for n in CORPUS["negatives"]]
MIN_RECALL = 0.97
MAX_FALSE_POSITIVE_RATE = 0.02

SECRETS = {
    "my password is hunter2!": "a password or secret",
    "the password for the prod db is hunter2": "a password or secret",
    "The user's favourite passcode is 482913.": "a password or secret",
    "api_key: sk_9f8e7d6c5b4a": "a password or secret",
    "postgres://bob:s3cretpw@db.internal/app": "a credential in a URL",
    "sk-ant-" + "a1" * 15: "an Anthropic API key",
    "token ghp_" + "A" * 36: "a GitHub token",
    "AKIAABCDEFGHIJKLMNOP": "an AWS access key id",
    "AKIA IOSF ODNN 7EXA MPLE": "an AWS access key id",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "an AWS secret access key",
    "-----BEGIN RSA PRIVATE KEY-----": "a private key",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmn": "a JSON web token",
    # base64 of "the password is hunter2": judged by what it decodes to
    "dGhlIHBhc3N3b3JkIGlzIGh1bnRlcjI=": "a password or secret (base64-encoded)",
}
PLAIN = [
    "The user prefers short answers.",
    "secret: " * 2000,  # a keyword repeated, no value: the input that made the scan quadratic
    "https://example.com/docs:intro",
    "password policy is strict",
    "I forgot my password",
    "a" * 50_000,
    "Ab1 " * 5_000,  # a long run of short mixed words: joined, it is still a pattern, not a key
    "AKIA IS THE PREFIX OF EVERY LONG TERM KEY",  # capitals only: a split key id holds a digit
    "VGhlIHVzZXIgcHJlZmVycyBzaG9ydCBhbnN3ZXJz",  # base64 of an ordinary sentence
]


@pytest.mark.parametrize("text", list(SECRETS))
def test_credentials_are_recognised(text):
    assert find_secret(text) == SECRETS[text]


@pytest.mark.parametrize("text", PLAIN, ids=range(len(PLAIN)))
def test_ordinary_text_passes(text):
    assert find_secret(text) is None


def test_the_corpus_recall_and_false_positive_rate(capsys):
    missed = [p["form"] for p in POSITIVES if find_secret(p["text"]) is None]
    flagged = [(n, find_secret(n)) for n in NEGATIVES if find_secret(n) is not None]
    recall = 1 - len(missed) / len(POSITIVES)
    false_positive_rate = len(flagged) / len(NEGATIVES)
    with capsys.disabled():
        print(
            f"\nsecret detector: recall {recall:.3f} on {len(POSITIVES)} positives, "
            f"false-positive rate {false_positive_rate:.3f} on {len(NEGATIVES)} negatives"
        )
    assert recall >= MIN_RECALL, missed
    assert false_positive_rate <= MAX_FALSE_POSITIVE_RATE, flagged


def test_the_corpus_covers_every_form_the_issue_names():
    forms = {p["form"] for p in POSITIVES}
    for needed in ("split by spaces", "split by zero-width spaces", "base64-wrapped", "full-width (NFKC)"):
        assert any(needed in form for form in forms), needed
    for name in ("anthropic", "aws_access_key_id", "aws_secret_bare", "github", "slack", "stripe", "jwt", "pem", "generic_token"):
        assert name in forms, name
    texts = {p["text"] for p in POSITIVES}
    assert {"the password for the prod db is hunter2", "my passcode is 482913", "PIN is 1234"} <= texts


def test_normalising_removes_what_hides_a_split():
    assert normalise("sk\u200b-ant\u2060-\ufeffapi") == "sk-ant-api"
    assert normalise("ｓｋ－ａｎｔ") == "sk-ant"


def test_entropy_is_measured_in_bits_per_character():
    assert entropy("aaaa") == 0
    assert entropy("abcd") == 2
    assert entropy("") == 0


def test_a_json_value_is_read_leaf_by_leaf_with_the_names_above():
    assert find_secret_in_value({"db": {"password": "swordfish"}}) == "a password or secret"
    assert find_secret_in_value({"pin": 4821}) == "a password or secret"
    assert find_secret_in_value(["ok", {"k": "AKIAIOSFODNN7EXAMPLE"}]) == "an AWS access key id"
    assert find_secret_in_value({"password policy": "12 characters", "count": 3, "on": True, "none": None}) is None
    deep: list[object] = ["passcode: 482913"]
    for _ in range(5_000):
        deep = [deep]
    assert find_secret_in_value(deep) == "a password or secret"


def test_the_secrets_of_a_transcript_are_spotted_again_without_their_keyword():
    values = secret_values("By the way my passcode is 482913, and the key is AKIA IOSF ODNN 7EXA MPLE.")
    assert values == {"482913", "AKIAIOSFODNN7EXAMPLE"}
    assert repeats_secret("The user's favourite number is 482913.", values)
    assert repeats_secret("Key: AKIAIOSF ODNN7EXAMPLE", values)  # split differently
    assert not repeats_secret("Order 4829130 shipped.", values)  # a longer number is another number
    assert not repeats_secret("anything", set())


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


# Every compiled pattern of the module, the known formats' and the helpers' alike.
PATTERNS = [p for p in vars(secrets).values() if isinstance(p, re.Pattern)] + [p for _, p, _ in secrets._KNOWN]


@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.pattern[:40] for p in PATTERNS])
def test_every_repetition_is_bounded_so_a_scan_is_linear(pattern: re.Pattern[str]):
    assert _unbounded(sre_parse.parse(pattern.pattern, pattern.flags)) == []
