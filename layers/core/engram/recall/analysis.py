"""Text analysis for recall: word tokens, index terms, stems, and the answer-type cue's time words.

- Words: lowercase tokens of letters and digits, curly apostrophes folded, possessive ``'s`` dropped.
- Terms: stop words removed (``stop_words.txt``, data), contractions cut to their word, Porter-stemmed
  (snowballstemmer's ``porter``, the original algorithm; words of one or two characters and words
  with digits are kept as they are).
- Exact forms: a word's unstemmed form as a term of its own (``=painting``), see ``recall.search``.
- Time expressions: the words that make a turn an answer to a *when* question (``time_words.txt``, data).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path


def _word_list(path: Path) -> frozenset[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w for line in lines if not line.startswith("#") for w in line.split())


STOP_WORDS = _word_list(Path(__file__).with_name("stop_words.txt"))

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lowercase word tokens, with curly apostrophes folded and possessives ('s) dropped."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    out = []
    for w in _WORD.findall(text):
        if w.endswith("'s"):
            w = w[:-2]
        out.append(w)
    return out


def analyze(text: str, *, stemming: bool = True) -> list[str]:
    """Index terms in text order: stop words dropped, contractions cut to their word, Porter-stemmed."""
    return terms_of(words(text), stemming=stemming)


def terms_of(raw_words: Iterable[str], *, stemming: bool = True) -> list[str]:
    out = []
    for w in raw_words:
        if w in STOP_WORDS:
            continue
        if "'" in w:
            w = w.split("'", 1)[0]
            if not w or w in STOP_WORDS:
                continue
        out.append(stem(w) if stemming else w)
    return out


@lru_cache(maxsize=65536)
def surface_term(word: str) -> str:
    """A word's unstemmed form as an index term of its own (one shared string per word)."""
    return "=" + word


_stemmer_lock = threading.Lock()


@lru_cache(maxsize=1)
def _porter() -> Callable[[str], str]:
    # snowballstemmer's package import loads all of its languages (~15 ms): with the first
    # search's indexing, not with the chat function's import. A stemmer object keeps its word
    # while it works, so threads take turns.
    import snowballstemmer

    stemmer = snowballstemmer.stemmer("porter")

    def stem_word(word: str) -> str:
        with _stemmer_lock:
            return str(stemmer.stemWord(word))

    return stem_word


@lru_cache(maxsize=65536)
def stem(w: str) -> str:
    """The Porter stem of a lowercase word; short words and words with digits as they are."""
    if len(w) <= 2 or not w.isalpha():
        return w
    return _porter()(w)


# --- answer-type cue: time expressions ----------------------------------------------------------
TIME_WORDS = _word_list(Path(__file__).with_name("time_words.txt"))
_WHEN_QUESTION = re.compile(
    r"^\s*(when\b|how long\b|what (year|month|day|date|time)\b|which (year|month|day|date)\b|since when\b)|\bhow long ago\b",
    re.IGNORECASE,
)


def has_time_expression(raw_words: Iterable[str]) -> bool:
    return any(w in TIME_WORDS or len(w) == 4 and w[:2] in ("19", "20") and w.isdigit() for w in raw_words)


def asks_when(query: str) -> bool:
    return bool(_WHEN_QUESTION.search(query))
