"""What ``recall.search`` adds to or multiplies into the terms' BM25F scores of the reached turns.

- Session prior: each session is also a document (plain BM25); a turn gains ``session_weight`` x
  the best turn's score x its session's score relative to the best session's.
- Answer type: a question asking *when* gives turns that contain a time expression a bonus
  weighted like a term as rare as they are.
- Dates: turns said on (or about) the asked-for days gain the weight of a term as rare as they
  are, decaying with the distance in days (``recall.timeref``).
- Turn priors: a turn's score x ``(length / its voice's average length) ** length_prior``, and x
  ``question_weight`` when it ends in a question mark.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from engram.recall.postings import Postings
from engram.recall.timeref import DateQuery


def _session_scores(index: Postings, weights: dict[str, float]) -> dict[str | None, float]:
    """Plain BM25 of whole sessions (each one document) for the query terms."""
    p = index.params
    n = len(index.group_len)
    if n < 2:
        return {}
    avg = max(sum(index.group_len.values()) / n, 1.0)
    out: dict[str | None, float] = {}
    for term, weight in weights.items():
        groups = index.group_post.get(term, ())
        if not groups:
            continue
        idf = math.log(1.0 + (n - len(groups) + 0.5) / (len(groups) + 0.5))
        for g in groups:
            tf = index.group_tf[g][term]
            norm = 1 - p.b + p.b * index.group_len[g] / avg
            out[g] = out.get(g, 0.0) + weight * idf * tf * (p.k1 + 1) / (tf + p.k1 * norm)
    return out


def session_prior(index: Postings, weights: dict[str, float], scores: dict[int, float]) -> None:
    if index.params.session_weight <= 0 or not scores:
        return
    groups = _session_scores(index, weights)
    best_group = max(groups.values(), default=0.0)
    if best_group <= 0:
        return
    lift = index.params.session_weight * max(scores.values()) / best_group
    for d in scores:
        g = groups.get(index.docs[d].group)
        if g:
            scores[d] += lift * g


def time_bonus(index: Postings, scores: dict[int, float]) -> None:
    if index.params.time_weight > 0 and index.time_df:
        bonus = index.params.time_weight * index.idf(index.time_df)
        for d in scores:
            if index.docs[d].has_time:
                scores[d] += bonus


def date_bonus(index: Postings, dq: DateQuery, scores: dict[int, float], allowed: Callable[[int], bool] | None) -> None:
    """Turns said on (or about) the asked-for days gain the weight of a term as rare as they are."""
    near: list[tuple[int, float]] = []
    exact = 0
    reach = 3 * dq.tolerance
    by_dates: dict[tuple[int, ...], int] = {}  # turns share their few dates: measure each set once
    for d, doc in enumerate(index.docs):
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
    bonus = index.params.date_weight * index.idf(max(exact, 1))
    get = scores.get
    for d, closeness in near:
        if allowed is None or allowed(d):
            scores[d] = get(d, 0.0) + bonus * closeness


def turn_priors(index: Postings, scores: dict[int, float]) -> None:
    """Longer turns and statements over questions: each score x its turn's prior / its voice's norm."""
    p = index.params
    if p.length_prior == 0 and p.question_weight == 1:
        return
    norms = {v: (total / count + 1) ** p.length_prior for v, (count, total) in index.voice_len.items()}
    docs = index.docs
    for d in scores:
        doc = docs[d]
        scores[d] *= doc.prior / norms[doc.voice]
