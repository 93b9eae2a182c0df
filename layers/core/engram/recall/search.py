"""Lexical ranking over conversation turns: BM25F with dialogue context, dates and a session prior.

Pure Python, no dependencies, built incrementally (``SearchIndex.add`` appends one turn).

- Analysis: lowercase word tokens (curly apostrophes folded, possessive ``'s`` dropped, digits
  kept), English stop words removed, contractions cut to their stem word, Porter-stemmed.
- Exact word forms: each word is also indexed unstemmed, as a term of its own (``=painting``); a
  query word weighs 0.7 through its stem and 0.3 through its exact form, so a turn using the
  question's own word ranks above one using another form of it (stemming alone ties them). The
  exact forms' postings hold a turn once per occurrence (no per-turn counts: ~27% more memory).
- BM25F over three fields, each length-normalised on its own, weighted, summed into one
  pseudo-frequency and saturated once with k1:
  ``text`` (the turn), ``ctx`` (the two turns before and after it in the same session, weights
  0.4 / 0.2 before and 0.25 / 0.125 after: an answer such as "Yes, we did it yesterday!" is found
  through the question before it), and ``speaker`` (the speaker's label: "what did Maria say about
  X" prefers Maria's turns; a query word naming a speaker matches through this field only, since
  in a dialogue a name inside the text is mostly the other person addressing them, and it re-ranks
  the turns the other query words found instead of adding every turn of that speaker).
- Session prior: each session is also a document (plain BM25); a turn gains 0.2 x the best turn's
  score x its session's score relative to the best session's.
- Answer type: a question asking *when* / *how long* / *what year* gives turns that contain a time
  expression (yesterday, last week, a weekday, a month, a year, ...) a bonus weighted like a term.
- Dates: a query naming a day, month, season or year ("on 9 November, 2022", "in July 2022",
  "in June" - that month of any year - or "last week" relative to ``today``) gives turns said on - or talking about - those days (their
  own relative expressions resolved against the day they were said: "yesterday", "last Friday",
  "two weeks ago") a bonus weighted like a term as rare as those turns, decaying with distance;
  the date words themselves are not matched as text. See ``timeref.py``.
- Turn priors: a turn's score is multiplied by ``(length / average length) ** 0.2`` (in index
  terms, against the average of its role - else speaker - so that a model's long replies do not
  outweigh the user's short lines; BM25 normalises length away, but in a dialogue the longer turn
  is the one that tells something) and by 0.8 when it ends in a question mark (a question asks
  rather than tells; its answer is found through the ctx field).

What each step measurably gives on LoCoMo is logged in docs/recall-tuning.md.
Speed: a query touches the postings of its terms only (plus one pass over the turns when it names
a date); per-term contributions are cached until the next ``add``. ~0.5-1 ms for ~600 turns.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from engram.recall.timeref import DateQuery, day_of, query_dates, turn_dates

# --- analysis ---------------------------------------------------------------------------------
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "just",
        "really",
        "like",
        "get",
        "got",
        "go",
        "going",
        "gonna",
        "yeah",
        "yes",
        "oh",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "well",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)

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
def _surface_term(word: str) -> str:
    """A word's unstemmed form as an index term of its own (one shared string per word)."""
    return "=" + word


# --- Porter stemmer (M.F. Porter, 1980), the original algorithm ---------------------------------
_VOWELS = frozenset("aeiou")


def _cons(w: str, i: int) -> bool:
    ch = w[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _measure(stem_: str) -> int:
    """m in [C](VC)^m[V]."""
    n, i, length = 0, 0, len(stem_)
    while i < length and _cons(stem_, i):
        i += 1
    while i < length:
        while i < length and not _cons(stem_, i):
            i += 1
        if i >= length:
            break
        n += 1
        while i < length and _cons(stem_, i):
            i += 1
    return n


def _has_vowel(stem_: str) -> bool:
    return any(not _cons(stem_, i) for i in range(len(stem_)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    if len(w) < 3:
        return False
    return _cons(w, len(w) - 3) and not _cons(w, len(w) - 2) and _cons(w, len(w) - 1) and w[-1] not in "wxy"


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""))
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


@lru_cache(maxsize=65536)
def stem(w: str) -> str:  # noqa: C901 - the Porter algorithm, step by step as published
    if len(w) <= 2 or not w.isalpha():
        return w
    # step 1a
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # step 1b
    again = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, again = w[:-2], True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, again = w[:-3], True
    if again:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    # step 1c
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    # step 2
    for suffix, repl in _STEP2:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    # step 3
    for suffix, repl in _STEP3:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    # step 4
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                w = base
            break
    # step 5
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


# --- answer-type cue: time expressions ----------------------------------------------------------
_TIME_WORDS = frozenset(
    [
        "yesterday",
        "today",
        "tonight",
        "tomorrow",
        "ago",
        "last",
        "next",
        "week",
        "weekend",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "day",
        "days",
        "morning",
        "afternoon",
        "evening",
        "night",
        "recently",
        "lately",
        "earlier",
        "later",
        "soon",
        "since",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
        "christmas",
        "birthday",
        "anniversary",
    ]
)
_WHEN_QUESTION = re.compile(
    r"^\s*(when\b|how long\b|what (year|month|day|date|time)\b|which (year|month|day|date)\b|since when\b)|\bhow long ago\b",
    re.IGNORECASE,
)


def has_time_expression(raw_words: Iterable[str]) -> bool:
    return any(w in _TIME_WORDS or len(w) == 4 and w[:2] in ("19", "20") and w.isdigit() for w in raw_words)


def asks_when(query: str) -> bool:
    return bool(_WHEN_QUESTION.search(query))


# --- the index ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Params:
    """Defaults are the benchmarked configuration; zero a weight to switch its step off."""

    k1: float = 1.2
    b: float = 0.75
    ctx_window: int = 2  # neighbouring turns on each side that form the ctx field
    ctx_weight: float = 0.4  # weight of the turn just before (x ctx_decay for each further turn)
    ctx_next_weight: float = 0.25  # weight of the turn just after (same decay)
    ctx_decay: float = 0.5
    speaker_weight: float = 1.5  # BM25F pseudo-frequency of a query term found in the speaker field
    speaker_text: float = 0.0  # weight in text/ctx of a query term that names a speaker
    session_weight: float = 0.2  # session prior (see the module docstring)
    time_weight: float = 1.0  # "when" questions: bonus for turns with a time expression (x its idf)
    date_weight: float = 1.5  # dated queries: bonus for turns on/about those days (x their idf)
    length_prior: float = 0.2  # a turn's score x (its length / the average length) ** this
    question_weight: float = 0.8  # a turn that ends in a question mark: its score x this
    surface_share: float = 0.3  # with stemming, the share of a query word's weight its exact form carries
    yearless_months: bool = True  # "in June" (no year) asks for June of any year
    stemming: bool = True


@dataclass
class _Doc:
    group: str | None
    text_tf: dict[str, int]
    text_len: int
    speaker_terms: tuple[str, ...]
    has_time: bool
    prior: float = 1.0  # (length + 1) ** length_prior x question_weight if it asks
    voice: str | None = None  # whose average length its length is measured against (role or speaker)
    dates: tuple[int, ...] = ()
    prev: int = -1
    next: int = -1
    lends: list[tuple[int, float]] | None = None


_TERM_CACHE = 2048


class SearchIndex:
    """An append-only BM25F index over turns. ``add`` returns the doc number ``search`` reports."""

    def __init__(self, params: Params | None = None):
        self.params = params or Params()
        self.docs: list[_Doc] = []
        self._df: dict[str, int] = {}
        self._post: dict[str, list[int]] = {}  # term -> docs whose own text has it
        self._text_total = 0
        self._voice_len: dict[str | None, tuple[int, int]] = {}  # voice -> (turns, index terms)
        self._spk_df: dict[str, int] = {}
        self._spk_post: dict[str, list[int]] = {}
        self._time_df = 0
        self._last_in_group: dict[str | None, int] = {}
        self._term_cache: dict[str, dict[int, float]] = {}
        # sessions as documents too
        self._group_tf: dict[str | None, dict[str, int]] = {}
        self._group_len: dict[str | None, int] = {}
        self._group_post: dict[str, list[str | None]] = {}

    def __len__(self) -> int:
        return len(self.docs)

    def analyze(self, text: str) -> list[str]:
        return analyze(text, stemming=self.params.stemming)

    def _surface(self, raw_words: list[str]) -> list[str]:
        """The words' unstemmed forms as terms of their own ("=painting"), when stemming is on and they weigh."""
        p = self.params
        if not p.stemming or p.surface_share <= 0:
            return []
        return [_surface_term(w) for w in terms_of(raw_words, stemming=False)]

    def add(
        self,
        text: str,
        *,
        speaker: str | None = None,
        group: str | None = None,
        when: str | None = None,
        role: str | None = None,
    ) -> int:
        """Appends one turn. Turns of a ``group`` (a session) must be added in conversation order.

        ``when`` (ISO timestamp) is when it was said: with it, the turn also matches queries about
        that day or the days its relative expressions name ("yesterday", "last Friday", ...).
        ``role`` (else ``speaker``) groups the turns whose average length the length prior uses:
        a model's long replies are measured against each other, not against the user's lines.
        """
        p = self.params
        raw = words(text)
        plain = terms_of(raw, stemming=False)
        terms = [stem(w) for w in plain] if p.stemming else plain
        tf: dict[str, int] = {}
        for term in terms:
            tf[term] = tf.get(term, 0) + 1
        surface = [_surface_term(w) for w in plain] if p.stemming and p.surface_share > 0 else []
        n = len(self.docs)
        doc = _Doc(
            group=group,
            text_tf=tf,
            text_len=len(terms),
            speaker_terms=tuple(dict.fromkeys(self.analyze(speaker or "") + self._surface(words(speaker or "")))),
            has_time=has_time_expression(raw),
            prior=(len(terms) + 1) ** p.length_prior * (p.question_weight if text.rstrip().endswith("?") else 1.0),
            voice=role or speaker,
            dates=turn_dates(text, day_of(when)) if p.date_weight > 0 else (),
        )
        if group is not None:
            prev = self._last_in_group.get(group, -1)
            if prev >= 0:
                doc.prev = prev
                self.docs[prev].next = n
                step = prev  # the turns whose neighbourhood now includes this one
                for _ in range(p.ctx_window):
                    if step < 0:
                        break
                    self.docs[step].lends = None
                    step = self.docs[step].prev
            self._last_in_group[group] = n
            gtf = self._group_tf.setdefault(group, {})
            for term, count in tf.items():
                if term not in gtf:
                    self._group_post.setdefault(term, []).append(group)
                gtf[term] = gtf.get(term, 0) + count
            self._group_len[group] = self._group_len.get(group, 0) + len(terms)
        self.docs.append(doc)
        for term in tf:
            self._df[term] = self._df.get(term, 0) + 1
            self._post.setdefault(term, []).append(n)
        for term in dict.fromkeys(surface):
            self._df[term] = self._df.get(term, 0) + 1
        for term in surface:  # no per-turn counts: the turn is in the postings once per occurrence
            self._post.setdefault(term, []).append(n)
        for term in doc.speaker_terms:
            self._spk_df[term] = self._spk_df.get(term, 0) + 1
            self._spk_post.setdefault(term, []).append(n)
        self._text_total += len(terms)
        count, total = self._voice_len.get(doc.voice, (0, 0))
        self._voice_len[doc.voice] = (count + 1, total + len(terms))
        self._time_df += doc.has_time
        self._term_cache.clear()
        return n

    # --- scoring ----------------------------------------------------------------------------
    def _idf(self, df: int) -> float:
        n = len(self.docs)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _lends(self, d: int) -> list[tuple[int, float]]:
        """(x, w): the turns x whose ctx field holds d's text, with the weight it has there.

        For a turn x before d, d is on x's "after" side, and vice versa; k steps away weighs
        ``weight * ctx_decay**(k-1)``. Cached; ``add`` resets the turns whose neighbourhood changes.
        """
        doc = self.docs[d]
        if doc.lends is not None:
            return doc.lends
        p = self.params
        out = []
        step, w = doc, p.ctx_next_weight
        for _ in range(p.ctx_window):
            if step.prev < 0 or w <= 0:
                break
            out.append((step.prev, w))
            step, w = self.docs[step.prev], w * p.ctx_decay
        step, w = doc, p.ctx_weight
        for _ in range(p.ctx_window):
            if step.next < 0 or w <= 0:
                break
            out.append((step.next, w))
            step, w = self.docs[step.next], w * p.ctx_decay
        doc.lends = out
        return out

    def _term_scores(self, term: str) -> dict[int, float]:
        """BM25F contribution (query weight 1) of one term to every turn it reaches. Cached until ``add``."""
        cached = self._term_cache.get(term)
        if cached is not None:
            return cached
        p = self.params
        docs = self.docs
        avg_len = max(self._text_total / len(docs), 1.0)
        k_b, b_avg = 1 - p.b, p.b / avg_len
        use_ctx = p.ctx_window > 0 and (p.ctx_weight > 0 or p.ctx_next_weight > 0)
        text_w = p.speaker_text if term in self._spk_df else 1.0
        freq: dict[int, float] = {}
        get = freq.get
        postings = self._post.get(term, ()) if text_w > 0 else ()
        counts = Counter(postings).items() if term[:1] == "=" else ((d, docs[d].text_tf[term]) for d in postings)
        for d, tf in counts:
            doc = docs[d]
            f = text_w * tf / (k_b + b_avg * doc.text_len)
            freq[d] = get(d, 0.0) + f
            if use_ctx:
                for x, w in doc.lends if doc.lends is not None else self._lends(d):
                    freq[x] = get(x, 0.0) + w * f
        if p.speaker_weight > 0:
            for d in self._spk_post.get(term, ()):
                freq[d] = get(d, 0.0) + p.speaker_weight
        idf = self._idf(max(self._df.get(term, 0), self._spk_df.get(term, 0)))
        k1 = p.k1
        c = idf * (k1 + 1)
        out = {d: c * f / (f + k1) for d, f in freq.items()}
        if len(self._term_cache) >= _TERM_CACHE:
            self._term_cache.clear()
        self._term_cache[term] = out
        return out

    def _group_scores(self, weights: dict[str, float]) -> dict[str | None, float]:
        """Plain BM25 of whole sessions (each one document) for the query terms."""
        p = self.params
        n = len(self._group_len)
        if n < 2:
            return {}
        avg = max(sum(self._group_len.values()) / n, 1.0)
        out: dict[str | None, float] = {}
        for term, weight in weights.items():
            groups = self._group_post.get(term, ())
            if not groups:
                continue
            idf = math.log(1.0 + (n - len(groups) + 0.5) / (len(groups) + 0.5))
            for g in groups:
                tf = self._group_tf[g][term]
                norm = 1 - p.b + p.b * self._group_len[g] / avg
                out[g] = out.get(g, 0.0) + weight * idf * tf * (p.k1 + 1) / (tf + p.k1 * norm)
        return out

    def _session_prior(self, weights: dict[str, float], scores: dict[int, float]) -> None:
        if self.params.session_weight <= 0 or not scores:
            return
        groups = self._group_scores(weights)
        best_group = max(groups.values(), default=0.0)
        if best_group <= 0:
            return
        lift = self.params.session_weight * max(scores.values()) / best_group
        for d in scores:
            g = groups.get(self.docs[d].group)
            if g:
                scores[d] += lift * g

    def _time_bonus(self, scores: dict[int, float]) -> None:
        if self.params.time_weight > 0 and self._time_df:
            bonus = self.params.time_weight * self._idf(self._time_df)
            for d in scores:
                if self.docs[d].has_time:
                    scores[d] += bonus

    def _date_bonus(self, dq: DateQuery, scores: dict[int, float], allowed: Callable[[int], bool] | None) -> None:
        """Turns said on (or about) the asked-for days gain the weight of a term as rare as they are."""
        near: list[tuple[int, float]] = []
        exact = 0
        reach = 3 * dq.tolerance
        by_dates: dict[tuple[int, ...], int] = {}  # turns share their few dates: measure each set once
        for d, doc in enumerate(self.docs):
            if not doc.dates:
                continue
            dist = by_dates.get(doc.dates, -1)
            if dist < 0:
                dist = by_dates[doc.dates] = min(dq.distance(day) for day in doc.dates)
            if dist <= reach:
                near.append((d, math.exp(-dist / dq.tolerance)))
                exact += dist == 0
        if not near:
            return
        bonus = self.params.date_weight * self._idf(max(exact, 1))
        get = scores.get
        for d, closeness in near:
            if allowed is None or allowed(d):
                scores[d] = get(d, 0.0) + bonus * closeness

    def search(
        self, query: str, *, limit: int = 10, allowed: Callable[[int], bool] | None = None, today: int | None = None
    ) -> list[tuple[int, float]]:
        """Doc numbers and scores, best first (ties: newer first). Empty for an empty index or a
        query without a known term or date.

        ``allowed`` filters docs (e.g. one session). ``today`` (a day number, see ``timeref``)
        lets relative dates in the query ("yesterday", "last week") count.
        """
        if not self.docs or limit <= 0:
            return []
        p = self.params
        dq = query_dates(query, today, yearless_months=p.yearless_months) if p.date_weight > 0 else None
        if dq is not None:
            for a, b in sorted(dq.spans, reverse=True):  # the date words match by date, not as text
                query = query[:a] + " " + query[b:]
        weights: dict[str, float] = {}
        raw = words(query)
        surface = self._surface(raw)
        stem_weight = 1.0 - p.surface_share if surface else 1.0
        for term, weight in [(t, stem_weight) for t in terms_of(raw, stemming=p.stemming)] + [
            (t, p.surface_share) for t in surface
        ]:
            if term in self._df or term in self._spk_df:
                weights[term] = weights.get(term, 0.0) + weight
        if not weights and dq is None:
            return []
        scores = self._scores(weights, dq, asks_when(query), allowed)
        self._apply_priors(scores)
        return [(d, v) for v, d in heapq.nlargest(limit, ((v, d) for d, v in scores.items()))]

    def _apply_priors(self, scores: dict[int, float]) -> None:
        """Turn priors: longer turns and statements over questions (see the module docstring)."""
        p = self.params
        if p.length_prior == 0 and p.question_weight == 1:
            return
        norms = {v: (total / count + 1) ** p.length_prior for v, (count, total) in self._voice_len.items()}
        docs = self.docs
        for d in scores:
            doc = docs[d]
            scores[d] *= doc.prior / norms[doc.voice]

    def _scores(
        self, weights: dict[str, float], dq: DateQuery | None, when: bool, allowed: Callable[[int], bool] | None
    ) -> dict[int, float]:
        """Every reached turn's score for weighted query terms (and the date and "when" cues)."""
        p = self.params
        # A query word naming a speaker (matched through the speaker field only) marks half of a
        # dialogue's turns: it re-ranks the turns the other words found rather than adding them all.
        by_speaker = {t: w for t, w in weights.items() if p.speaker_text <= 0 and t in self._spk_df}
        scores: dict[int, float] = {}
        get = scores.get
        for term, weight in weights.items():
            if term not in by_speaker:
                for d, v in self._term_scores(term).items():
                    scores[d] = get(d, 0.0) + weight * v
        if allowed is not None:
            scores = {d: v for d, v in scores.items() if allowed(d)}
        self._session_prior(weights, scores)
        if when:
            self._time_bonus(scores)
        if dq is not None:
            self._date_bonus(dq, scores, allowed)
        for term, weight in by_speaker.items():
            contribution = self._term_scores(term)
            if scores:
                for d in scores:
                    extra = contribution.get(d)
                    if extra:
                        scores[d] += weight * extra
            else:  # the query names only a speaker
                scores = {d: weight * v for d, v in contribution.items() if allowed is None or allowed(d)}
        return scores
