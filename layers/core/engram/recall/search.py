"""Lexical ranking over conversation turns: BM25F with dialogue context, dates and a session prior.

Pure Python, built incrementally (``SearchIndex.add`` appends one turn). Its parts:
``recall.analysis`` (tokens, stop words as data, stems, time words), ``recall.postings`` (the
append-only index of turns, terms and sessions), ``recall.priors`` (what is added to or multiplied
into the term scores), ``recall.params`` (the weights); this module scores the query's terms
with BM25F and puts the parts together.

- Analysis: lowercase word tokens (curly apostrophes folded, possessive ``'s`` dropped, digits
  kept), English stop words removed, contractions cut to their stem word, Porter-stemmed
  (snowballstemmer).
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
from collections import Counter
from collections.abc import Callable

from engram.recall import priors
from engram.recall.analysis import asks_when, terms_of, words
from engram.recall.params import Params
from engram.recall.postings import Postings
from engram.recall.timeref import DateQuery, query_dates

_TERM_CACHE = 2048


class SearchIndex:
    """An append-only BM25F index over turns. ``add`` returns the doc number ``search`` reports."""

    def __init__(self, params: Params | None = None):
        self.params = params or Params()
        self.postings = Postings(self.params)
        self._term_cache: dict[str, dict[int, float]] = {}

    def __len__(self) -> int:
        return len(self.postings)

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
        n = self.postings.add(text, speaker=speaker, group=group, when=when, role=role)
        self._term_cache.clear()
        return n

    # --- scoring ----------------------------------------------------------------------------
    def _term_scores(self, term: str) -> dict[int, float]:
        """BM25F contribution (query weight 1) of one term to every turn it reaches. Cached until ``add``."""
        cached = self._term_cache.get(term)
        if cached is not None:
            return cached
        p = self.params
        index = self.postings
        docs = index.docs
        avg_len = max(index.text_total / len(docs), 1.0)
        k_b, b_avg = 1 - p.b, p.b / avg_len
        use_ctx = p.ctx_window > 0 and (p.ctx_weight > 0 or p.ctx_next_weight > 0)
        text_w = p.speaker_text if term in index.spk_df else 1.0
        freq: dict[int, float] = {}
        get = freq.get
        postings = index.post.get(term, ()) if text_w > 0 else ()
        counts = Counter(postings).items() if term[:1] == "=" else ((d, docs[d].text_tf[term]) for d in postings)
        for d, tf in counts:
            doc = docs[d]
            f = text_w * tf / (k_b + b_avg * doc.text_len)
            freq[d] = get(d, 0.0) + f
            if use_ctx:
                for x, w in doc.lends if doc.lends is not None else index.lends(d):
                    freq[x] = get(x, 0.0) + w * f
        if p.speaker_weight > 0:
            for d in index.spk_post.get(term, ()):
                freq[d] = get(d, 0.0) + p.speaker_weight
        idf = index.idf(max(index.df.get(term, 0), index.spk_df.get(term, 0)))
        k1 = p.k1
        c = idf * (k1 + 1)
        out = {d: c * f / (f + k1) for d, f in freq.items()}
        if len(self._term_cache) >= _TERM_CACHE:
            self._term_cache.clear()
        self._term_cache[term] = out
        return out

    def search(
        self, query: str, *, limit: int = 10, allowed: Callable[[int], bool] | None = None, today: int | None = None
    ) -> list[tuple[int, float]]:
        """Doc numbers and scores, best first (ties: newer first). Empty for an empty index or a
        query without a known term or date.

        ``allowed`` filters docs (e.g. one session). ``today`` (a day number, see ``timeref``)
        lets relative dates in the query ("yesterday", "last week") count.
        """
        index = self.postings
        if not index.docs or limit <= 0:
            return []
        p = self.params
        dq = query_dates(query, today, yearless_months=p.yearless_months) if p.date_weight > 0 else None
        if dq is not None:
            for a, b in sorted(dq.spans, reverse=True):  # the date words match by date, not as text
                query = query[:a] + " " + query[b:]
        weights: dict[str, float] = {}
        raw = words(query)
        surface = index.surface(raw)
        stem_weight = 1.0 - p.surface_share if surface else 1.0
        for term, weight in [(t, stem_weight) for t in terms_of(raw, stemming=p.stemming)] + [
            (t, p.surface_share) for t in surface
        ]:
            if term in index.df or term in index.spk_df:
                weights[term] = weights.get(term, 0.0) + weight
        if not weights and dq is None:
            return []
        scores = self._scores(weights, dq, asks_when(query), allowed)
        priors.turn_priors(index, scores)
        return [(d, v) for v, d in heapq.nlargest(limit, ((v, d) for d, v in scores.items()))]

    def _scores(
        self, weights: dict[str, float], dq: DateQuery | None, when: bool, allowed: Callable[[int], bool] | None
    ) -> dict[int, float]:
        """Every reached turn's score for weighted query terms (and the date and "when" cues)."""
        p = self.params
        index = self.postings
        # A query word naming a speaker (matched through the speaker field only) marks half of a
        # dialogue's turns: it re-ranks the turns the other words found rather than adding them all.
        by_speaker = {t: w for t, w in weights.items() if p.speaker_text <= 0 and t in index.spk_df}
        scores: dict[int, float] = {}
        get = scores.get
        for term, weight in weights.items():
            if term not in by_speaker:
                for d, v in self._term_scores(term).items():
                    scores[d] = get(d, 0.0) + weight * v
        if allowed is not None:
            scores = {d: v for d, v in scores.items() if allowed(d)}
        priors.session_prior(index, weights, scores)
        if when:
            priors.time_bonus(index, scores)
        if dq is not None:
            priors.date_bonus(index, dq, scores, allowed)
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
