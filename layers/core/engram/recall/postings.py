"""The append-only inverted index of conversation turns that ``recall.search`` ranks.

Per turn (a ``Turn``): its terms' counts, length, speaker terms, whether it holds a time
expression, its prior factor, the days it was said on or talks about, and its neighbours in its
session. Per term: document frequency and postings over the turns' own text (exact word forms
``=word`` once per occurrence: no per-turn counts) and over the speaker field. Per session (a
``group``): its terms' counts and length, so a session can be scored as one document.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from engram.recall.analysis import has_time_expression, stem, surface_term, terms_of, words
from engram.recall.params import Params
from engram.recall.timeref import day_of, turn_dates


@dataclass
class Turn:
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


class Postings:
    def __init__(self, params: Params):
        self.params = params
        self.docs: list[Turn] = []
        self.df: dict[str, int] = {}
        self.post: dict[str, list[int]] = {}  # term -> docs whose own text has it
        self.text_total = 0
        self.voice_len: dict[str | None, tuple[int, int]] = {}  # voice -> (turns, index terms)
        self.spk_df: dict[str, int] = {}
        self.spk_post: dict[str, list[int]] = {}
        self.time_df = 0
        self._last_in_group: dict[str | None, int] = {}
        # sessions as documents too
        self.group_tf: dict[str | None, dict[str, int]] = {}
        self.group_len: dict[str | None, int] = {}
        self.group_post: dict[str, list[str | None]] = {}

    def __len__(self) -> int:
        return len(self.docs)

    def surface(self, raw_words: list[str]) -> list[str]:
        """The words' unstemmed forms as terms of their own ("=painting"), when stemming is on and they weigh."""
        p = self.params
        if not p.stemming or p.surface_share <= 0:
            return []
        return [surface_term(w) for w in terms_of(raw_words, stemming=False)]

    def add(self, text: str, *, speaker: str | None, group: str | None, when: str | None, role: str | None) -> int:
        """Appends one turn (see ``SearchIndex.add``) and returns its doc number."""
        p = self.params
        raw = words(text)
        plain = terms_of(raw, stemming=False)
        terms = [stem(w) for w in plain] if p.stemming else plain
        tf: dict[str, int] = {}
        for term in terms:
            tf[term] = tf.get(term, 0) + 1
        surface = [surface_term(w) for w in plain] if p.stemming and p.surface_share > 0 else []
        n = len(self.docs)
        speaker_words = words(speaker or "")
        doc = Turn(
            group=group,
            text_tf=tf,
            text_len=len(terms),
            speaker_terms=tuple(dict.fromkeys(terms_of(speaker_words, stemming=p.stemming) + self.surface(speaker_words))),
            has_time=has_time_expression(raw),
            prior=(len(terms) + 1) ** p.length_prior * (p.question_weight if text.rstrip().endswith("?") else 1.0),
            voice=role or speaker,
            dates=turn_dates(text, day_of(when)) if p.date_weight > 0 else (),
        )
        if group is not None:
            self._link(doc, n, group)
            gtf = self.group_tf.setdefault(group, {})
            for term, count in tf.items():
                if term not in gtf:
                    self.group_post.setdefault(term, []).append(group)
                gtf[term] = gtf.get(term, 0) + count
            self.group_len[group] = self.group_len.get(group, 0) + len(terms)
        self.docs.append(doc)
        for term in tf:
            self.df[term] = self.df.get(term, 0) + 1
            self.post.setdefault(term, []).append(n)
        for term in dict.fromkeys(surface):
            self.df[term] = self.df.get(term, 0) + 1
        for term in surface:  # no per-turn counts: the turn is in the postings once per occurrence
            self.post.setdefault(term, []).append(n)
        for term in doc.speaker_terms:
            self.spk_df[term] = self.spk_df.get(term, 0) + 1
            self.spk_post.setdefault(term, []).append(n)
        self.text_total += len(terms)
        count, total = self.voice_len.get(doc.voice, (0, 0))
        self.voice_len[doc.voice] = (count + 1, total + len(terms))
        self.time_df += doc.has_time
        return n

    def _link(self, doc: Turn, n: int, group: str) -> None:
        """Chains the turn after its session's last one and resets the ctx of the turns it now reaches."""
        prev = self._last_in_group.get(group, -1)
        if prev >= 0:
            doc.prev = prev
            self.docs[prev].next = n
            step = prev  # the turns whose neighbourhood now includes this one
            for _ in range(self.params.ctx_window):
                if step < 0:
                    break
                self.docs[step].lends = None
                step = self.docs[step].prev
        self._last_in_group[group] = n

    def idf(self, df: int) -> float:
        n = len(self.docs)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def lends(self, d: int) -> list[tuple[int, float]]:
        """(x, w): the turns x whose ctx field holds d's text, with the weight it has there.

        For a turn x before d, d is on x's "after" side, and vice versa; k steps away weighs
        ``weight * ctx_decay**(k-1)``. Cached; ``add`` resets the turns whose neighbourhood changes.
        """
        doc = self.docs[d]
        if doc.lends is not None:
            return doc.lends
        p = self.params
        doc.lends = self._reach(doc, p.ctx_next_weight, lambda t: t.prev) + self._reach(doc, p.ctx_weight, lambda t: t.next)
        return doc.lends

    def _reach(self, doc: Turn, weight: float, neighbour: Callable[[Turn], int]) -> list[tuple[int, float]]:
        """The turns up to ctx_window steps away on one side, each with its decayed weight."""
        out = []
        step, w = doc, weight
        for _ in range(self.params.ctx_window):
            d = neighbour(step)
            if d < 0 or w <= 0:
                break
            out.append((d, w))
            step, w = self.docs[d], w * self.params.ctx_decay
        return out
