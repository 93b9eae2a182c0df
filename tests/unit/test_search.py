"""The conversation ranker (recall.search, with recall.analysis) and the date reader it uses (recall.timeref)."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.recall.analysis import analyze, asks_when, stem, words
from engram.recall.params import Params
from engram.recall.search import SearchIndex
from engram.recall.timeref import day_of, explicit_dates, query_dates, turn_dates


def _day(y: int, m: int, d: int) -> int:
    return date(y, m, d).toordinal()


# --- analysis -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "word, expected",
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("cats", "cat"),
        ("agreed", "agre"),
        ("motoring", "motor"),
        ("hopping", "hop"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("hopeful", "hope"),
        ("goodness", "good"),
        ("adjustment", "adjust"),
        ("generalization", "gener"),
        ("running", "run"),
        ("painting", "paint"),
        ("paints", "paint"),
        ("painted", "paint"),
        ("sing", "sing"),
        ("2023", "2023"),
    ],
)
def test_porter_stemmer_matches_the_reference_algorithm(word, expected):
    assert stem(word) == expected


def test_analysis_drops_stop_words_possessives_and_case():
    assert analyze("Caroline's kids LOVED the pottery classes! Don't you think? It\u2019s 2023.") == [
        "carolin",
        "kid",
        "love",
        "potteri",
        "class",
        "think",
        "2023",
    ]
    assert analyze("what did you do about it, and when?") == []
    assert words("Mel\u2019s café") == ["mel", "caf"]


def test_inflections_meet_at_one_stem():
    assert set(analyze("I painted")) == set(analyze("she paints")) == set(analyze("painting"))


# --- ranking ------------------------------------------------------------------------------------
def _index(turns, params=None):
    index = SearchIndex(params)
    for turn in turns:
        text, speaker, group = (turn + (None, None))[:3] if isinstance(turn, tuple) else (turn, None, None)
        index.add(text, speaker=speaker, group=group)
    return index


def test_the_turn_about_the_query_ranks_first():
    index = _index(
        [
            "We went to the beach last weekend.",
            "I signed up for a pottery class, it is so relaxing.",
            "The weather has been lovely.",
            "Pottery? I tried a class once.",
        ]
    )
    ranked = [d for d, _ in index.search("pottery class")]
    assert ranked[0] in (1, 3) and set(ranked) == {1, 3}
    assert [d for d, _ in index.search("relaxing pottery")][0] == 1


def test_rare_terms_weigh_more_than_common_ones():
    index = _index(["I like the park", "the park is nice", "the park again", "a saxophone in the park"])
    assert index.search("park saxophone")[0][0] == 3


def test_an_answer_is_found_through_the_question_before_it():
    index = SearchIndex()
    index.add("Did you end up going to the ceramics workshop?", speaker="Ana", group="s1")
    index.add("Yes! I made a blue bowl there.", speaker="Ben", group="s1")
    index.add("Nice weather today.", speaker="Ana", group="s2")
    index.add("I made pancakes this morning.", speaker="Ben", group="s2")
    ranked = [d for d, _ in index.search("what did Ben make at the ceramics workshop")]
    # Ben's answer holds none of the words: it is found through the question before it
    assert set(ranked[:2]) == {0, 1} and 2 not in ranked and 3 not in ranked


def test_context_does_not_cross_sessions():
    index = SearchIndex()
    index.add("tell me about volcanoes", group="a")
    index.add("sure thing", group="b")
    assert [d for d, _ in index.search("volcanoes")] == [0]


def test_a_named_speaker_prefers_their_turns():
    index = SearchIndex()
    index.add("I love hiking in the mountains.", speaker="Maria", group="s")
    index.add("Hiking is great, Maria!", speaker="John", group="s")
    index.add("I love hiking too.", speaker="John", group="t")
    assert index.search("Does Maria love hiking?")[0][0] == 0
    assert index.search("Does John love hiking?")[0][0] == 2


def test_when_questions_prefer_turns_with_a_time():
    index = SearchIndex()
    index.add("I adopted a puppy, it is adorable.", group="a")
    index.add("I adopted a puppy last week.", group="b")
    assert asks_when("When did she adopt the puppy?")
    assert index.search("When did she adopt the puppy?")[0][0] == 1


def test_dated_queries_prefer_turns_said_or_pointing_to_that_day():
    index = SearchIndex()
    index.add("I went to a concert", group="s1", when="2023-05-08T13:56:00.000Z")  # doc 0
    index.add("I went to a concert yesterday", group="s2", when="2023-06-02T10:00:00.000Z")  # about June 1
    index.add("I went to a concert", group="s3", when="2023-09-20T10:00:00.000Z")
    assert index.search("concert on 8 May, 2023")[0][0] == 0
    assert index.search("What concert on June 1, 2023?")[0][0] == 1
    assert index.search("concert in September 2023")[0][0] == 2
    # relative dates in the query count when the caller says what day it is
    assert index.search("the concert yesterday", today=_day(2023, 9, 21))[0][0] == 2


def test_incremental_add_is_searchable_at_once():
    index = SearchIndex()
    index.add("the first message about gardening", group="s")
    assert [d for d, _ in index.search("gardening")] == [0]
    assert index.search("trombone") == []
    n = index.add("I bought a trombone today", group="s")
    assert n == 1 and index.search("trombone")[0][0] == 1
    assert len(index) == 2
    # cached per-term scores were invalidated: the new turn's neighbour context counts too
    assert {d for d, _ in index.search("gardening")} == {0, 1}


def test_filter_and_limit():
    index = _index([(f"note number {i} about kayaks", None, "a" if i % 2 else "b") for i in range(30)])
    assert len(index.search("kayaks", limit=7)) == 7
    only_a = index.search("kayaks", limit=50, allowed=lambda d: d % 2 == 1)
    assert only_a and all(d % 2 == 1 for d, _ in only_a)
    assert index.search("kayaks", limit=0) == []


def test_ties_put_newer_turns_first():
    index = _index(["same words here", "same words here", "same words here"])
    assert [d for d, _ in index.search("same words")] == [2, 1, 0]


def test_a_statement_outranks_the_same_words_asked_as_a_question():
    # equal words, and the question is newer (ties go to newer turns): the statement still wins
    index = _index(["Pottery class on Saturday.", "Pottery class on Saturday?"])
    assert [d for d, _ in index.search("pottery class")] == [0, 1]
    plain = _index(["Pottery class on Saturday.", "Pottery class on Saturday?"], Params(question_weight=1.0))
    assert [d for d, _ in plain.search("pottery class")] == [1, 0]


def test_among_equal_matches_the_turn_that_tells_more_comes_first():
    turns = [
        ("I started a pottery class and made a blue bowl for my sister.", "Maria", "s1"),
        ("Cool.", "Maria", "s2"),
        ("Nice weather.", "John", "s2"),
    ]
    # a query that names only the speaker matches all her turns equally; the longer one first
    assert [d for d, _ in _index(turns).search("What did Maria say?")] == [0, 1]
    # without the length prior the tie goes to the newer turn
    assert [d for d, _ in _index(turns, Params(length_prior=0.0)).search("What did Maria say?")] == [1, 0]


def test_length_counts_against_the_average_of_the_same_role():
    turns = [
        ("My cat is called Marzipan.", "user", "s"),
        ("You said: my cat is called Marzipan. A lovely name for a cat, I bet she is sweet and loves the sun.", "assistant", "s"),
        ("Another long reply about the weather, the news and what to cook for dinner tonight with friends.", "assistant", "t"),
        ("Thanks!", "user", "t"),
    ]

    def first(with_roles: bool) -> int:
        index = SearchIndex()
        for text, role, group in turns:
            index.add(text, group=group, role=role if with_roles else None)
        return index.search("cat called Marzipan")[0][0]

    # the model's reply, long like all its replies, does not outrank the user's own line ...
    assert first(with_roles=True) == 0
    # ... as it would if both were measured against one average
    assert first(with_roles=False) == 1


def test_the_length_prior_narrows_bm25s_preference_for_short_turns():
    turns = ["Pottery class was fun.", "My pottery class was great, the class made bowls and the teacher loved them."]
    turns += ["We had pasta for dinner.", "The weather was nice today."]

    def ratio(params: Params) -> float:
        scores = dict(_index(turns, params).search("pottery class"))
        return scores[1] / scores[0]

    assert ratio(Params()) > ratio(Params(length_prior=0.0)) * 1.1


@pytest.mark.parametrize("query", ["", "   ", "the and of", "?!...", "\U0001f600\U0001f389", "zzqx unknownword"])
def test_empty_or_garbage_queries_find_nothing(query):
    index = _index(["a turn about zebras", "another about giraffes"])
    assert index.search(query) == []
    assert SearchIndex().search("zebras") == []


def test_ablation_switches_turn_steps_off():
    off = Params(stemming=False, ctx_window=0, speaker_weight=0, speaker_text=1, session_weight=0, time_weight=0, date_weight=0)
    index = _index(["I painted a lake", "we talked about painting"], off)
    assert [d for d, _ in index.search("painting")] == [1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=15), st.text(max_size=60))
def test_arbitrary_text_never_breaks_search(turns, query):
    index = SearchIndex()
    for i, text in enumerate(turns):
        index.add(text, speaker=text[:5] or None, group=str(i % 3), when="2024-02-29T00:00:00.000Z")
    ranked = index.search(query, limit=5, today=_day(2024, 3, 1))
    assert len(ranked) <= 5
    assert all(0 <= d < len(turns) for d, _ in ranked)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


# --- dates --------------------------------------------------------------------------------------
def test_turn_dates_resolve_relative_expressions_against_the_day_said():
    said = _day(2023, 5, 8)  # a Monday
    assert day_of("2023-05-08T13:56:00.000Z") == said and day_of("nonsense") is None
    assert turn_dates("I went yesterday", said) == (said - 1, said)
    assert _day(2023, 5, 5) in turn_dates("last Friday was fun", said)
    assert _day(2023, 5, 6) in turn_dates("this past weekend we hiked", said)
    assert said - 14 in turn_dates("two weeks ago I moved", said)
    assert said + 30 in turn_dates("next month I start", said)
    assert _day(2022, 12, 25) in turn_dates("on December 25, 2022 we met", None)


@pytest.mark.parametrize(
    "query, start, end, precision",
    [
        ("What did Nate do on 25 May, 2022?", (2022, 5, 25), (2022, 5, 25), "day"),
        ("Which book on 8th December, 2023?", (2023, 12, 8), (2023, 12, 8), "day"),
        ("What painting on October 13, 2023?", (2023, 10, 13), (2023, 10, 13), "day"),
        ("news from 2023-06-16", (2023, 6, 16), (2023, 6, 16), "day"),
        ("Where did Joanna travel to in July 2022?", (2022, 7, 1), (2022, 7, 31), "month"),
        ("the beach in 2023", (2023, 1, 1), (2023, 12, 31), "year"),
        ("What state in summer 2021?", (2021, 6, 1), (2021, 8, 31), "season"),
    ],
)
def test_query_dates(query, start, end, precision):
    dq = query_dates(query)
    assert dq is not None and (dq.start, dq.end, dq.precision) == (_day(*start), _day(*end), precision)


def test_query_dates_before_relative_and_none():
    dq = query_dates("the week before August 3, 2023")
    assert dq is not None and dq.end == _day(2023, 8, 3) and dq.start < dq.end
    assert query_dates("what about pottery?") is None
    assert query_dates("what did we say yesterday?") is None  # relative needs today
    dq = query_dates("what did we say yesterday?", today=_day(2024, 1, 10))
    assert dq is not None and dq.start == dq.end == _day(2024, 1, 9)
    # not a day: ignored (not an error); the year still counts
    assert [e[2] for e in explicit_dates("February 30, 2023")] == ["year"]


def test_a_month_without_a_year_is_that_month_of_any_year():
    dq = query_dates("When did we go camping in June?")
    assert dq is not None and dq.month == 6 and dq.precision == "month"
    assert dq.distance(_day(2021, 6, 15)) == dq.distance(_day(2023, 6, 1)) == 0
    assert dq.distance(_day(2023, 7, 3)) == 3 and dq.distance(_day(2022, 12, 31)) > 150
    assert getattr(query_dates("the second week of November"), "month", None) == 11
    # "may" the verb is no month; a month with a year stays that one month
    assert query_dates("What may we try next?") is None
    dq = query_dates("What did we do in May 2023?")
    assert dq is not None and dq.month == 0 and (dq.start, dq.end) == (_day(2023, 5, 1), _day(2023, 5, 31))
    # "last June" with today: the latest June before it
    dq = query_dates("What did we do last June?", today=_day(2024, 3, 10))
    assert dq is not None and (dq.start, dq.end) == (_day(2023, 6, 1), _day(2023, 6, 30))


def test_questions_naming_a_month_prefer_turns_from_that_month():
    index = SearchIndex()
    index.add("We went camping by the lake.", group="s1", when="2023-07-14T10:00:00.000Z")  # doc 0
    index.add("We went camping by the lake.", group="s2", when="2022-06-20T10:00:00.000Z")  # doc 1, a June
    index.add("We went camping by the lake.", group="s3", when="2023-05-20T10:00:00.000Z")  # doc 2, May 2023
    index.add("We went camping by the lake.", group="s4", when="2022-05-02T10:00:00.000Z")  # doc 3, May 2022
    # equal words: the month decides (without it the newest turn would come first)
    assert index.search("When did we go camping in June?")[0][0] == 1
    assert index.search("camping in May 2023")[0][0] == 2
    assert index.search("camping in May 2022")[0][0] == 3
    assert [d for d, _ in index.search("camping in May")][:2] in ([2, 3], [3, 2])


def test_the_exact_word_ranks_above_another_form_of_it():
    # "painting" and "painted" share the stem "paint": both turns match, the one using the
    # question's own word ranks first; without the exact-form share they would tie.
    index = SearchIndex()
    index.add("I painted a lake at sunrise for the show", speaker="Ann", group="s1")
    index.add("I finished painting a lake for the show", speaker="Ann", group="s2")
    index.add("The weather was lovely all week long", speaker="Bob", group="s3")
    hits = index.search("Which painting did Ann show?")
    assert [d for d, _ in hits[:2]] == [1, 0]
    tied = SearchIndex(Params(surface_share=0.0))
    tied.add("I painted a lake at sunrise for the show", speaker="Ann", group="s1")
    tied.add("I finished painting a lake for the show", speaker="Ann", group="s2")
    tied.add("The weather was lovely all week long", speaker="Bob", group="s3")
    scores = dict(tied.search("Which painting did Ann show?"))
    assert scores[0] == pytest.approx(scores[1])


def test_another_form_of_the_word_still_matches():
    index = SearchIndex()
    index.add("We went hiking in the hills last weekend", speaker="Ann", group="s1")
    index.add("The weather was lovely all week long", speaker="Bob", group="s1")
    assert [d for d, _ in index.search("Does Ann like to hike?")][:1] == [0]
