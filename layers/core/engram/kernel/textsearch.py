"""Searching a list's rows by what a person types (the console's search boxes, the `q` of the
memory, facts and runs listings), scored as the agent's recall scores memory rows: the query's
words (lowercase, stop words dropped) that a row shares, so a row sharing more ranks first; a row
also matches when it contains the whole query as typed (case-insensitive), so "zebr" finds
"zebra117" as a search box would."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+")


_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "with",
        "you",
        "your",
    ]
)


def terms(text: str) -> set[str]:
    """The words of `text` that count for matching: lowercase letters and digits, no stop words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


QUERY_MAX_CHARS = 200


@dataclass(frozen=True)
class TextQuery:
    text: str

    @property
    def words(self) -> set[str]:
        return terms(self.text)

    def score(self, *fields: str | None) -> int:
        """0 when the row does not match; else twice the query words it shares, plus one when it
        holds the whole query as typed."""
        haystack = " ".join(f for f in fields if f)
        shared = len(self.words & terms(haystack))
        whole = self.text.lower() in haystack.lower()
        return 2 * shared + (1 if whole else 0)

    def rank(self, score: int, then: str) -> str:
        """A list rank (for `page_ranked`): the best score first, then the list's own order."""
        return f"{9999 - min(score, 9999):04d}#{then}"

    def list_id(self, base: str) -> str:
        """The paging token's list: a token of one search does not page another."""
        return f"{base}?q={hashlib.sha256(self.text.encode()).hexdigest()[:16]}"


def text_query(q: str | None) -> TextQuery | None:
    """The query a listing's `q` asks for, or None when it asks for none (missing or blank)."""
    text = (q or "").strip()
    return TextQuery(text) if text else None
