"""EventBridge Scheduler, emulated: fire the schedules stored in moto at their times.

moto stores schedules but never runs them. `ScheduleLoop` does what the service would: every few
seconds it lists the schedules of the stack's group, works out which are due, fills the target's
Input with Scheduler's context attributes (`<aws.scheduler.scheduled-time>`,
`<aws.scheduler.execution-id>`, `<aws.scheduler.attempt-number>`, `<aws.scheduler.schedule-arn>`)
and invokes the function the target names, as the service invokes Lambda (asynchronously: an
error is logged, never raised, and not retried).

Semantics (UTC only):
- `rate(N minute|minutes|hour|hours|day|days)` fires at LastModificationDate + k*N, k >= 1 (the
  first firing one interval after the schedule was created or last updated).
- `cron(minutes hours day-of-month month day-of-week year)` with `*`, `?`, numbers, lists, ranges,
  steps (`*/n`, `a-b/n`, `a/n`), month and weekday names, weekdays numbered 1=SUN..7=SAT; only
  times after the schedule's last modification count. `L`, `W` and `#` are not supported: such a
  schedule is skipped with one warning.
- Each due time fires at most once per loop; a loop that fell behind fires only the most recent
  missed time (no burst). DISABLED schedules are skipped. StartDate and EndDate are not honoured.
"""

from __future__ import annotations

import calendar
import json
import logging
import re
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import boto3

from .apigw import Functions, LoadedFunction
from .resources import ACCOUNT_ID, LOCAL_HEARTBEAT_FUNCTION_ARN, Resources

log = logging.getLogger("local")

DEFAULT_INTERVAL_S = 5.0
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
ATTEMPT_NUMBER = "<aws.scheduler.attempt-number>"
SCHEDULE_ARN = "<aws.scheduler.schedule-arn>"


class UnsupportedExpression(ValueError):
    """A valid EventBridge Scheduler expression that the local emulation cannot run."""


# --------------------------------------------------------------------------- expressions
_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
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
    cron = _CRON.match(expression)
    if not cron:
        raise UnsupportedExpression(f"{expression!r}: only rate() and cron() expressions run locally")
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


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def next_fire_times(expression: str, anchor: datetime, *, after: datetime | None = None, count: int = 5) -> list[datetime]:
    """The next `count` firings after `after` (default: the anchor, i.e. the schedule's creation
    or last update)."""
    parsed, anchor = parse_expression(expression), _utc(anchor)
    out: list[datetime] = []
    cursor: datetime | None = _utc(after) if after else anchor
    while cursor is not None and len(out) < count:
        cursor = parsed.following(anchor, cursor)
        if cursor is not None:
            out.append(cursor)
    return out


def due_time(expression: str, anchor: datetime, now: datetime, last_fired: datetime | None = None) -> datetime | None:
    """The firing to run at `now`: the most recent one in (anchor, now] that is later than
    `last_fired`, or None. Older missed firings are dropped (no burst after falling behind)."""
    latest = parse_expression(expression).latest(_utc(anchor), _utc(now))
    if latest is None or (last_fired is not None and latest <= _utc(last_fired)):
        return None
    return latest


# --------------------------------------------------------------------------- the loop
def fill_input(raw: str | None, *, scheduled: datetime, schedule_arn: str, execution_id: str | None = None) -> Any:
    """The event a target receives: its Input with the context attributes replaced."""
    text = (raw or "{}").replace(SCHEDULED_TIME, scheduled.strftime("%Y-%m-%dT%H:%M:%SZ"))
    text = text.replace(EXECUTION_ID, execution_id or uuid.uuid4().hex).replace(ATTEMPT_NUMBER, "1")
    text = text.replace(SCHEDULE_ARN, schedule_arn)
    try:
        return json.loads(text)
    except ValueError:
        return text


class ScheduleLoop:
    """Fires the due schedules of the template's schedule group; `tick()` is one pass."""

    def __init__(self, functions: Functions, resources: Resources, *, interval: float = DEFAULT_INTERVAL_S) -> None:
        self.functions = functions
        self.interval = interval
        try:
            self.group: str | None = resources.schedule_group()
        except KeyError:  # a template without a schedule group: nothing to fire
            self.group = None
        self.client: Any = boto3.client("scheduler", region_name=resources.region)
        # Targets by ARN: the fixed local heartbeat ARN, and every function's own local ARN.
        self.targets: dict[str, LoadedFunction] = {
            f"arn:aws:lambda:{resources.region}:{ACCOUNT_ID}:function:{fn.function_name}": fn for fn in functions
        }
        if "HeartbeatFunction" in functions.by_id:
            self.targets[LOCAL_HEARTBEAT_FUNCTION_ARN] = functions["HeartbeatFunction"]
        self._last_fired: dict[str, datetime] = {}
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("firing schedules failed")

    def _schedules(self) -> Iterable[dict[str, Any]]:
        kwargs: dict[str, Any] = {"GroupName": self.group}
        while True:
            page = self.client.list_schedules(**kwargs)
            yield from page.get("Schedules", [])
            if not page.get("NextToken"):
                return
            kwargs["NextToken"] = page["NextToken"]

    def _warn_once(self, schedule: dict[str, Any], reason: str) -> None:
        key = (schedule["Name"], schedule.get("ScheduleExpression", ""))
        if key not in self._warned:
            self._warned.add(key)
            log.warning("schedule %s (%s) is skipped: %s", schedule["Name"], key[1], reason)

    def _due(self, schedule: dict[str, Any], now: datetime) -> datetime | None:
        expression = schedule.get("ScheduleExpression", "")
        timezone = schedule.get("ScheduleExpressionTimezone") or "UTC"
        if timezone != "UTC" and not expression.startswith("rate("):
            self._warn_once(schedule, f"time zone {timezone}: only UTC runs locally")
            return None
        anchor = schedule.get("LastModificationDate") or schedule["CreationDate"]
        try:
            return due_time(expression, anchor, now, self._last_fired.get(schedule["Arn"]))
        except ValueError as err:  # UnsupportedExpression included
            self._warn_once(schedule, str(err))
            return None

    def tick(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """One pass: fire every schedule due at `now` (default: the clock); returns the events sent."""
        if self.group is None:
            return []
        now = _utc(now or datetime.now(UTC))
        calls: list[tuple[LoadedFunction, dict[str, Any]]] = []
        with self._lock:  # the background loop and fire_schedules() never fire a time twice
            for summary in self._schedules():
                if summary.get("State") == "DISABLED":
                    continue
                schedule = self.client.get_schedule(Name=summary["Name"], GroupName=self.group)
                if schedule.get("State") == "DISABLED":
                    continue
                due = self._due(schedule, now)
                if due is None:
                    continue
                self._last_fired[schedule["Arn"]] = due
                target = schedule.get("Target", {})
                function = self.targets.get(target.get("Arn", ""))
                if function is None:
                    self._warn_once(schedule, f"target {target.get('Arn')!r} is not a function of the local stack")
                    continue
                calls.append((function, fill_input(target.get("Input"), scheduled=due, schedule_arn=schedule["Arn"])))
        for function, event in calls:
            try:
                function.invoke(event)
            except Exception:
                log.exception("%s failed a scheduled invocation", function.spec.logical_id)
            else:
                log.info("%s <- schedule fired", function.spec.logical_id)
        return [event for _, event in calls]
