"""Dates in conversation text and in search queries, as day numbers (proleptic Gregorian ordinals).

- ``turn_dates(text, said_on)``: the days a turn talks about: the day it was said, plus what its
  relative expressions point to ("yesterday", "last Friday", "two weeks ago", "next month") and
  any explicit dates it names ("May 7, 2023", "7 May 2023", "2023-05-07").
- ``query_dates(query, today)``: the days a query asks about, as an interval with its precision
  (an explicit day, month, season or year; "before/by <date>" widens it backwards; with ``today``,
  relative expressions such as "yesterday" or "last week" too; a month named without a year, "in
  June", is that month of any year, and "last June" with ``today`` the latest June before it), and
  the character spans of those expressions so the ranker can leave the date words out of the
  lexical match.

Pure functions, no dependencies; approximate by design (a month is 30 days).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple": 2,
    "a couple": 2,
    "a couple of": 2,
    "couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 4,
}
_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11), "winter": (12, 2)}

_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({_MONTH_RE})\.?,?\s*(\d{{4}})\b", re.I)
_MONTH_FIRST = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s*(\d{{4}})\b", re.I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(\d{{4}})\b", re.I)
_SEASON_YEAR = re.compile(r"\b(spring|summer|fall|autumn|winter)\s+(?:of\s+)?(\d{4})\b", re.I)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
# a month without a year after a word that makes it a time ("in May", "last June", "the second week
# of November", "early March"; a bare "may" is mostly the verb): the month of any year
_MONTH_ALONE = re.compile(
    r"\b(in|during|last|this|early|mid|late|since|until|by|of)\s+"
    r"(?:(?:early|mid|late|the\s+(?:beginning|end|middle|start))\s+(?:of\s+)?)?"
    rf"({_MONTH_RE})\b(?!\.?,?\s*\d)",
    re.I,
)
_BEFORE = re.compile(r"\b(before|by|until|as of|prior to)\s*$", re.I)
_AFTER = re.compile(r"\b(after|since)\s*$", re.I)

_NUM_RE = (
    r"(\d+|a couple of|a couple|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# (words one of which must be in the lowercased text, pattern, what it resolves to); the words are a
# cheap filter so that most turns never run most patterns
_RELATIVE: list[tuple[tuple[str, ...], re.Pattern[str], object]] = [
    (("yesterday", "last night"), re.compile(r"\b(yesterday|last night)\b", re.I), -1),
    (
        ("today", "tonight", "this morning", "this afternoon", "this evening"),
        re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening)|earlier today)\b", re.I),
        0,
    ),
    (("tomorrow",), re.compile(r"\btomorrow\b", re.I), 1),
    (("weekend",), re.compile(r"\b(?:last|this past|past) weekend\b", re.I), "last_weekend"),
    (("weekend",), re.compile(r"\bnext weekend\b", re.I), "next_weekend"),
    (
        _WEEKDAY_NAMES,
        re.compile(r"\b(?:last|this past|past) (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I),
        "last_wd",
    ),
    (_WEEKDAY_NAMES, re.compile(r"\bnext (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I), "next_wd"),
    (_WEEKDAY_NAMES, re.compile(r"\b(?:on|this) (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I), "last_wd"),
    (("week",), re.compile(r"\b(?:last|past|previous) week\b", re.I), -7),
    (("week",), re.compile(r"\bnext week\b", re.I), 7),
    (("month",), re.compile(r"\b(?:last|past|previous) month\b", re.I), -30),
    (("month",), re.compile(r"\bnext month\b", re.I), 30),
    (("year",), re.compile(r"\blast year\b", re.I), -365),
    (("year",), re.compile(r"\bnext year\b", re.I), 365),
    (("ago",), re.compile(rf"\b{_NUM_RE}\s+(day|week|month|year)s?\s+ago\b", re.I), "ago"),
    (("day", "week", "month", "year"), re.compile(rf"\bin\s+{_NUM_RE}\s+(day|week|month|year)s?\b", re.I), "in"),
]
_DIGIT = re.compile(r"\d")


def day_of(value: str | None) -> int | None:
    """The day number of an ISO timestamp or date ("2023-05-08T13:56:00Z"); None if unreadable."""
    if not value or len(value) < 10:
        return None
    try:
        return date.fromisoformat(value[:10]).toordinal()
    except ValueError:
        return None


def _day(y: int, m: int, d: int) -> int | None:
    try:
        return date(y, m, d).toordinal()
    except ValueError:
        return None


def _month_span(y: int, m: int) -> tuple[int, int] | None:
    start = _day(y, m, 1)
    if start is None:
        return None
    end = _day(y + (m == 12), m % 12 + 1, 1)
    return start, (end or start + 30) - 1


def _count(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _relative(kind: object, m: re.Match[str], ref: int) -> int | None:
    if isinstance(kind, int):
        return ref + kind
    weekday = date.fromordinal(ref).weekday()
    if kind == "last_weekend":
        back = (weekday - 5) % 7 or 7  # the Saturday before (a week back when said on a Saturday)
        return ref - back
    if kind == "next_weekend":
        return ref + ((5 - weekday) % 7 or 7)
    if kind == "last_wd":
        target = WEEKDAYS[m.group(1).lower()]
        return ref - ((weekday - target) % 7 or 7)
    if kind == "next_wd":
        target = WEEKDAYS[m.group(1).lower()]
        return ref + ((target - weekday) % 7 or 7)
    if kind in ("ago", "in"):
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        return ref - days if kind == "ago" else ref + days
    return None


def explicit_dates(text: str) -> list[tuple[int, int, str, tuple[int, int]]]:
    """(start, end, precision, span) of every explicit date in ``text``; the most precise wins a span."""
    found: list[tuple[int, int, str, tuple[int, int]]] = []
    taken: list[tuple[int, int]] = []

    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in taken)

    for rx, order in ((_DAY_FIRST, "dmy"), (_MONTH_FIRST, "mdy"), (_ISO_DAY, "iso")):
        for m in rx.finditer(text):
            if order == "dmy":
                d, mo, y = int(m.group(1)), MONTHS[m.group(2).lower()], int(m.group(3))
            elif order == "mdy":
                mo, d, y = MONTHS[m.group(1).lower()], int(m.group(2)), int(m.group(3))
            else:
                y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            day = _day(y, mo, d)
            if day is not None and free(m.span()):
                found.append((day, day, "day", m.span()))
                taken.append(m.span())
    for m in _MONTH_YEAR.finditer(text):
        span = _month_span(int(m.group(2)), MONTHS[m.group(1).lower()])
        if span and free(m.span()):
            found.append((span[0], span[1], "month", m.span()))
            taken.append(m.span())
    for m in _SEASON_YEAR.finditer(text):
        first, last = _SEASONS[m.group(1).lower()]
        y = int(m.group(2))
        a = _month_span(y, first)
        b = _month_span(y + (last < first), last)
        if a and b and free(m.span()):
            found.append((a[0], b[1], "season", m.span()))
            taken.append(m.span())
    for m in _YEAR.finditer(text):
        y = int(m.group(1))
        if free(m.span()):
            found.append((date(y, 1, 1).toordinal(), date(y, 12, 31).toordinal(), "year", m.span()))
            taken.append(m.span())
    return found


def turn_dates(text: str, said_on: int | None) -> tuple[int, ...]:
    """The days a turn is about: when it was said, what its relative expressions resolve to, explicit days."""
    days: set[int] = set()
    if said_on is not None:
        days.add(said_on)
        lowered = text.lower()
        for needles, rx, kind in _RELATIVE:
            if not any(n in lowered for n in needles):
                continue
            for m in rx.finditer(text):
                resolved = _relative(kind, m, said_on)
                if resolved is not None:
                    days.add(resolved)
    if _DIGIT.search(text):
        for start, _end, precision, _span in explicit_dates(text):
            if precision == "day":
                days.add(start)
    return tuple(sorted(days))


@dataclass(frozen=True)
class DateQuery:
    start: int
    end: int
    precision: str  # day | week | month | season | year
    spans: tuple[tuple[int, int], ...]  # characters of the query that expressed it
    month: int = 0  # 1-12: that month of any year (start/end unused), e.g. "in June"

    @property
    def tolerance(self) -> float:
        """Days over which a near miss still counts (decay constant of the date bonus)."""
        return {"day": 3.0, "week": 4.0, "month": 10.0, "season": 20.0, "year": 45.0}.get(self.precision, 7.0)

    def distance(self, day: int) -> int:
        if self.month:
            return _from_month(day, self.month)
        if day < self.start:
            return self.start - day
        if day > self.end:
            return day - self.end
        return 0


@lru_cache(maxsize=65536)
def _from_month(day: int, month: int) -> int:
    """Days from ``day`` to the nearest day of ``month`` in any year (0 inside it)."""
    year = date.fromordinal(day).year
    best = 366
    for y in (year - 1, year, year + 1):
        span = _month_span(y, month)
        if span is not None:
            best = min(best, span[0] - day if day < span[0] else day - span[1] if day > span[1] else 0)
    return best


def query_dates(query: str, today: int | None = None, *, yearless_months: bool = True) -> DateQuery | None:
    """The time a query asks about, or None. The most precise explicit date wins; else a relative one."""
    explicit = explicit_dates(query)
    rank = {"day": 0, "month": 1, "season": 2, "year": 3}
    if explicit:
        start, end, precision, span = min(explicit, key=lambda e: rank[e[2]])
        before = query[: span[0]]
        spans = [span]
        m = _BEFORE.search(before)
        if m:
            # "before/by August 3, 2023": the days leading up to it
            start, end = start - (14 if precision == "day" else 45), start
            spans.append(m.span())
        elif _AFTER.search(before):
            start, end = end, end + (14 if precision == "day" else 45)
        return DateQuery(start, end, precision, tuple(spans))
    m = _MONTH_ALONE.search(query) if yearless_months else None
    if m:
        month = MONTHS[m.group(2).lower()]
        if today is not None and m.group(1).lower() == "last":
            now = date.fromordinal(today)
            year = now.year - (month >= now.month)
            start, end = _month_span(year, month) or (today, today)
            return DateQuery(start, end, "month", (m.span(),))
        return DateQuery(0, 0, "month", (m.span(2),), month=month)
    if today is not None:
        for _needles, rx, kind in _RELATIVE:
            m = rx.search(query)
            if m is None:
                continue
            day = _relative(kind, m, today)
            if day is None:
                continue
            if isinstance(kind, int) and abs(kind) >= 7:
                width = abs(kind) // 2
                return DateQuery(day - width, day + width, "week" if abs(kind) == 7 else "month", (m.span(),))
            return DateQuery(day, day, "day", (m.span(),))
    return None
