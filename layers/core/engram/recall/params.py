"""The ranker's configuration (``recall.search``): the weights docs/recall-tuning.md chose."""

from __future__ import annotations

from dataclasses import dataclass


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
    session_weight: float = 0.2  # session prior (see recall.priors)
    time_weight: float = 1.0  # "when" questions: bonus for turns with a time expression (x its idf)
    date_weight: float = 1.5  # dated queries: bonus for turns on/about those days (x their idf)
    length_prior: float = 0.2  # a turn's score x (its length / the average length) ** this
    question_weight: float = 0.8  # a turn that ends in a question mark: its score x this
    surface_share: float = 0.3  # with stemming, the share of a query word's weight its exact form carries
    yearless_months: bool = True  # "in June" (no year) asks for June of any year
    stemming: bool = True
