"""EventBridge Scheduler expressions: one parser for the API (an expression Scheduler would refuse
is a 400 before any AWS call, in AWS and locally alike) and for the local schedule loop (which
works out when a schedule fires).

- `rate(N minute|minutes|hour|hours|day|days)`, N >= 1.
- `cron(minutes hours day-of-month month day-of-week year)` with `*`, `?`, numbers, lists, ranges,
  steps (`*/n`, `a-b/n`, `a/n`), month and weekday names (weekdays 1=SUN..7=SAT); exactly one of
  day-of-month and day-of-week is `?`. `L`, `W` and `#` are valid in AWS (accepted by `check`) but
  the local loop cannot run them (UnsupportedExpression).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from engram.kernel.errors import BadRequest


class UnsupportedExpression(ValueError):
    """A valid EventBridge Scheduler expression that the local emulation cannot run."""


# --------------------------------------------------------------------------- expressions
_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
_MONTHS = {
    name: i for i, name in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1)
}
_WEEKDAYS = {name: i for i, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), 1)}
_UNSUPPORTED_ATOM = re.compile(r"^(\d*L|\d+W|LW|L-\d+)$")


@dataclass(frozen=True)
class Rate:
    every: timedelta

    def latest(self, anchor: datetime, now: datetime) -> datetime | None:
        """The last firing in (anchor, now]."""
        if now < anchor + self.every:
            return None
        return anchor + ((now - anchor) // self.every) * self.every

    def following(self, anchor: datetime, after: datetime) -> datetime | None:
        """The first firing after `after` (and after anchor)."""
        k = max(1, (after - anchor) // self.every + 1)
        return anchor + k * self.every


@dataclass(frozen=True)
class Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...] | None  # None: `?`, the weekdays decide
    months: tuple[int, ...]
    days_of_week: tuple[int, ...] | None  # 1=SUN..7=SAT; None: `?`, the days of the month decide
    years: tuple[int, ...]

    def day_matches(self, day: date) -> bool:
        if self.days_of_month is not None:
            return day.day in self.days_of_month
        return aws_weekday(day) in (self.days_of_week or ())

    def _times(self, start: datetime, end: datetime, *, reverse: bool) -> Iterator[datetime]:
        """Firing times of the days in [start.date(), end.date()], in order (or reversed); the
        caller filters the two boundary days to the minute."""
        order = (lambda values: sorted(values, reverse=True)) if reverse else sorted
        first, last = (start.year, start.month), (end.year, end.month)
        for year in order(y for y in self.years if start.year <= y <= end.year):
            for month in order(m for m in self.months if first <= (year, m) <= last):
                for day_number in order(range(1, calendar.monthrange(year, month)[1] + 1)):
                    day = date(year, month, day_number)
                    if not (start.date() <= day <= end.date()) or not self.day_matches(day):
                        continue
                    for hour in order(self.hours):
                        for minute in order(self.minutes):
                            yield datetime(year, month, day_number, hour, minute, tzinfo=UTC)

    def latest(self, anchor: datetime, now: datetime) -> datetime | None:
        for t in self._times(anchor, now, reverse=True):
            if t <= anchor:
                return None
            if t <= now:
                return t
        return None

    def following(self, anchor: datetime, after: datetime) -> datetime | None:
        after = max(anchor, after)
        for t in self._times(after, datetime(max(self.years), 12, 31, 23, 59, tzinfo=UTC), reverse=False):
            if t > after:
                return t
        return None


def aws_weekday(day: date) -> int:
    """EventBridge's day-of-week number: 1=SUN, 2=MON ... 7=SAT."""
    return (day.weekday() + 1) % 7 + 1


def _atom(text: str, names: dict[str, int] | None, field: str) -> int:
    upper = text.upper()
    if names and upper in names:
        return names[upper]
    if text.isdigit():
        return int(text)
    if _UNSUPPORTED_ATOM.match(upper):
        raise UnsupportedExpression(f"{field} {text!r}: L and W are not supported locally")
    raise ValueError(f"{field}: {text!r} is not a number{' or a name' if names else ''}")


def _cron_field(text: str, field: str, low: int, high: int, names: dict[str, int] | None = None) -> tuple[int, ...] | None:
    if text == "?":
        return None
    values: set[int] = set()
    for item in text.split(","):
        if "#" in item:
            raise UnsupportedExpression(f"{field} {item!r}: # is not supported locally")
        part, _, step_text = item.partition("/")
        step = _atom(step_text, None, field) if step_text else 1
        if part == "*":
            start, end = low, high
        elif "-" in part and not _UNSUPPORTED_ATOM.match(part.upper()):
            left, _, right = part.partition("-")
            start, end = _atom(left, names, field), _atom(right, names, field)
        else:
            start = _atom(part, names, field)
            end = high if step_text else start
        if not (low <= start <= end <= high) or step < 1:
            raise ValueError(f"{field}: {item!r} is outside {low}-{high} or not a valid range or step")
        values.update(range(start, end + 1, step))
    return tuple(sorted(values))


def parse_expression(expression: str) -> Rate | Cron:
    """A rate() or cron() expression; UnsupportedExpression for what the emulation cannot run,
    ValueError for what EventBridge Scheduler would reject."""
    expression = expression.strip()
    rate = _RATE.match(expression)
    if rate:
        value = int(rate.group(1))
        if value < 1:
            raise ValueError(f"{expression}: the rate must be at least 1")
        return Rate(value * _UNITS[rate.group(2).removesuffix("s")])
    one_time = _AT.match(expression)
    if one_time:
        try:
            datetime.strptime(one_time.group(1), "%Y-%m-%dT%H:%M:%S")
        except ValueError:
            raise ValueError(f"{expression}: at() takes a date and time yyyy-mm-ddThh:mm:ss") from None
        raise UnsupportedExpression(f"{expression!r}: one-time at() schedules do not run locally")
    cron = _CRON.match(expression)
    if not cron:
        raise ValueError(f"{expression!r} is not a rate(), cron() or at() expression")
    fields = cron.group(1).split()
    if len(fields) != 6:
        raise ValueError(f"{expression}: cron() takes 6 fields (minutes hours day-of-month month day-of-week year)")
    minutes, hours, dom, month, dow, year = fields
    if "?" in (minutes, hours, month, year):
        raise ValueError(f"{expression}: ? is only allowed in day-of-month or day-of-week")
    parsed = Cron(
        minutes=_cron_field(minutes, "minutes", 0, 59) or (),
        hours=_cron_field(hours, "hours", 0, 23) or (),
        days_of_month=_cron_field(dom, "day-of-month", 1, 31),
        months=_cron_field(month, "month", 1, 12, _MONTHS) or (),
        days_of_week=_cron_field(dow, "day-of-week", 1, 7, _WEEKDAYS),
        years=_cron_field(year, "year", 1970, 2199) or (),
    )
    if (parsed.days_of_month is None) == (parsed.days_of_week is None):
        raise ValueError(f"{expression}: exactly one of day-of-month and day-of-week must be ?")
    return parsed


def shortest_interval(expression: str) -> timedelta | None:
    """The shortest time between two firings of a valid rate() or cron() expression (None for a
    one-time at()). For cron, the gaps between its times of day and across midnight (as if it
    fired every day: a schedule whose days never touch is judged a little strictly)."""
    expression = expression.strip()
    rate = _RATE.match(expression)
    if rate:
        return int(rate.group(1)) * _UNITS[rate.group(2).removesuffix("s")]
    cron = _CRON.match(expression)
    if not cron:
        return None
    minutes, hours = cron.group(1).split()[:2]
    times = sorted(
        h * 60 + m for h in _cron_field(hours, "hours", 0, 23) or () for m in _cron_field(minutes, "minutes", 0, 59) or ()
    )
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)] + [times[0] + 1440 - times[-1]]
    return timedelta(minutes=min(gaps))


def check(expression: str, *, min_interval_s: int = 60) -> str:
    """The expression, if EventBridge Scheduler would accept it; else 400 `invalid_schedule`.
    One that fires more often than every `min_interval_s` seconds is 400 `schedule_too_frequent`."""
    try:
        parse_expression(expression)
    except UnsupportedExpression:
        pass  # valid in AWS; only the local loop cannot run it
    except ValueError as err:
        raise BadRequest(
            f"schedule {expression!r} is not a valid EventBridge Scheduler expression: {err}",
            field="schedule",
            code="invalid_schedule",
        ) from None
    interval = shortest_interval(expression)
    if interval is not None and interval.total_seconds() < min_interval_s:
        raise BadRequest(
            f"schedule {expression!r} fires as often as every {int(interval.total_seconds())} s; the shortest interval "
            f"allowed is {min_interval_s} s (MIN_SCHEDULE_INTERVAL_SECONDS)",
            field="schedule",
            code="schedule_too_frequent",
        )
    return expression
