"""Passwords stated in any language Django's translators keep a word for (`words`), and passphrases
written as a sentence.

- "Moje hasło do banku to Kwiatek#2023", "私のパスワードはSakura2024!です", "şifrem Kedi1234": a
  language's word for "password" (with a suffix: Turkish "şifrem", Polish "hasła", Korean "비밀번호는";
  anywhere in scripts written without spaces) followed, in the same sentence and within a few words,
  by a password-shaped value (letters with digits or symbols). A plain word is not enough there: the
  rule cannot tell "is" from "expired" in 90 languages.
- "my passphrase is: correct horse battery staple", "the password is the sentence purple monkeys
  dance at midnight", `password is "bring two lemons to grandma"`: a password word, maybe a "for the
  NAS" clause, "is" or ":", then a quoted phrase of 3+ words, or ("the sentence"/"the phrase" before
  it) 3+ plain words, or 4+ lower-case words to the sentence's end with at most one ordinary word
  ("My password is longer than yours" and "The password is on the fridge" are talk, not secrets).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from engram.secrets.statements import ORDINARY, password_shaped
from engram.secrets.text import Finding, normalise
from engram.secrets.words import password_words

# Scripts written without spaces between words: a keyword there has no word boundary.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)|[\n。！？]")
_VALUE = re.compile(r"[!-~]{6,64}")  # printable ASCII between spaces or other scripts' letters
_VALUES_AFTER = 4
_WINDOW = 120


def _pattern(word: str) -> str:
    word = normalise(word).lower()
    if _UNSPACED.match(word):
        return re.escape(word)
    # the word or its stem with a suffix of its language: hasło/hasła/hasłem, şifre/şifrem, пароль/пароля
    stem = word[:-1] if len(word) >= 5 and word[-1].isalpha() else word
    body = r"\s{1,3}".join(re.escape(part) for part in stem.split())
    return rf"(?<![^\W\d_]){body}[^\W\d_]{{0,6}}(?![^\W\d_])"


@functools.cache
def _keyword() -> re.Pattern[str]:
    words = sorted(password_words(), key=len, reverse=True)
    return re.compile("|".join(_pattern(w) for w in words), re.I)


def _sentence_after(text: str, end: int) -> str:
    window = text[end : end + _WINDOW]
    stop = _SENTENCE_END.search(window)
    return window[: stop.start()] if stop else window


def _stated_in_any_language(text: str) -> Iterator[Finding]:
    for keyword in _keyword().finditer(text):
        after = _sentence_after(text, keyword.end())
        for run in list(_VALUE.finditer(after))[:_VALUES_AFTER]:
            value = run.group(0).rstrip(".,;:!?)]}>\"'").lstrip("([{<\"'")
            if password_shaped(value) and value.lower() not in ORDINARY:
                yield "a password or secret", value
                break


_PHRASE_KEYWORD = re.compile(r"(?i)(?<![\w-])(?:pass ?(?:words?|phrases?)|pwd)(?![\w-])")
_CLAUSE = re.compile(r"(?i)\s{1,3}(?:for|to|of|on)\s{1,3}(?:[\w'-]{1,30}\s{1,3}){0,4}?(?=(?:is|was|:)\W)")
_IS = re.compile(r"(?i)\s{0,3}(?:is|was|:|=)\s{0,3}:?\s{0,3}(?P<cue>the (?:sentence|phrase|words?)\s{1,3}:?\s{0,3})?")
_QUOTED = re.compile(r"[\"“'‘]([^\"”'’\n]{3,200})[\"”'’]")
_PHRASE_WORD = re.compile(r"[a-z]{1,30}")
# Words a description is made of ("long and easy for me to remember"), beside statements' ordinary words.
_FUNCTION = frozenset(
    [
        "and",
        "or",
        "for",
        "me",
        "to",
        "of",
        "the",
        "a",
        "an",
        "is",
        "are",
        "be",
        "than",
        "then",
        "what",
        "with",
        "without",
        "as",
        "like",
    ]
)


def _passphrases(text: str) -> Iterator[Finding]:
    for keyword in _PHRASE_KEYWORD.finditer(text):
        at = keyword.end()
        clause = _CLAUSE.match(text, at)
        verb = _IS.match(text, clause.end() if clause else at)
        if verb is None or verb.end() == (clause.end() if clause else at):
            continue
        sentence = _sentence_after(text, verb.end())
        quoted = _QUOTED.match(sentence)
        if quoted and len(quoted.group(1).split()) >= 3:
            yield "a passphrase", quoted.group(1)
            continue
        words = sentence.split()
        if not all(_PHRASE_WORD.fullmatch(w) for w in words):
            continue
        ordinary = sum(w in ORDINARY or w in _FUNCTION for w in words)
        if (verb.group("cue") and len(words) >= 3) or (len(words) >= 4 and ordinary <= 1):
            yield "a passphrase", " ".join(words)


def stated_anywhere(text: str) -> Iterator[Finding]:
    """Passwords stated in other languages and passphrases (module docstring)."""
    yield from _stated_in_any_language(text)
    yield from _passphrases(text)
