"""EventBridge Scheduler, emulated: fire the schedules stored in moto at their times.

moto stores schedules but never runs them. `ScheduleLoop` does what the service would: every few
seconds it lists the schedules of the stack's group, works out which are due, fills the target's
Input with Scheduler's context attributes (`<aws.scheduler.scheduled-time>`,
`<aws.scheduler.execution-id>`, `<aws.scheduler.attempt-number>`, `<aws.scheduler.schedule-arn>`)
and invokes the function the target names, as the service invokes Lambda (asynchronously: an
error is logged, never raised, and not retried; when the function has an on-failure destination
queue, Lambda's record of the failed invocation is sent there, as Lambda does once its retries are
spent).

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

import json
import logging
import threading
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
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


def parse_expression(expression: str) -> Any:
    """The core's parser (engram.runs.expressions), imported on use: `python -m local.stack` has
    the layers on sys.path only once start_stack() has put its own import of them there."""
    from engram.runs.expressions import parse_expression as parse

    return parse(expression)


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


def failure_record(
    payload: Any, error: BaseException | tuple[str, str], *, function_arn: str, request_id: str, when: datetime, attempts: int = 1
) -> dict[str, Any]:
    """What Lambda sends an asynchronous invocation's on-failure destination once its retries are
    spent (`error`: the exception, or its type name and message)."""
    error_type, message = (type(error).__name__, str(error)) if isinstance(error, BaseException) else error
    return {
        "version": "1.0",
        "timestamp": when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
        "requestContext": {
            "requestId": request_id,
            "functionArn": f"{function_arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": payload,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": []},
    }


class ScheduleLoop:
    """Fires the due schedules of the template's schedule group; `tick()` is one pass."""

    def __init__(self, functions: Functions, resources: Resources, *, interval: float = DEFAULT_INTERVAL_S) -> None:
        self.functions = functions
        self.resources = resources
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
        self._created = datetime.now(UTC)  # the template's rules count their rates from here
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

    def _send_failure(self, function: LoadedFunction, event: Any, err: Exception) -> None:
        """Lambda's on-failure destination: the failed invocation's record goes to the function's queue."""
        queue = function.spec.on_failure_queue
        if queue is None:
            return
        arn = f"arn:aws:lambda:{self.resources.region}:{ACCOUNT_ID}:function:{function.function_name}"
        record = failure_record(event, err, function_arn=arn, request_id=str(uuid.uuid4()), when=datetime.now(UTC))
        try:
            sqs = boto3.client("sqs", region_name=self.resources.region)
            sqs.send_message(QueueUrl=self.resources.queue_url(queue), MessageBody=json.dumps(record))
        except Exception:
            log.exception("could not send the failed invocation of %s to %s", function.spec.logical_id, queue)

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

    def _rules_due(self, now: datetime) -> list[tuple[LoadedFunction, Any]]:
        """The template's own Schedule events (EventBridge rules, e.g. the stale-run sweeper) due
        at `now`, counted from the loop's creation."""
        calls: list[tuple[LoadedFunction, Any]] = []
        for function in self.functions:
            for rule in getattr(function.spec, "rules", ()):  # stand-in functions of tests have none
                key = f"rule:{rule.function_id}:{rule.event_name}"
                try:
                    due = due_time(rule.expression, self._created, now, self._last_fired.get(key))
                except ValueError as err:
                    self._warn_once({"Name": key, "ScheduleExpression": rule.expression}, str(err))
                    continue
                if due is not None:
                    self._last_fired[key] = due
                    calls.append((function, json.loads(rule.input) if rule.input else {}))
        return calls

    def tick(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """One pass: fire every schedule due at `now` (default: the clock); returns the events sent."""
        now = _utc(now or datetime.now(UTC))
        calls: list[tuple[LoadedFunction, dict[str, Any]]] = []
        with self._lock:  # the background loop and fire_schedules() never fire a time twice
            calls += self._rules_due(now)
            for summary in self._schedules() if self.group is not None else ():
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
            except Exception as err:
                log.exception("%s failed a scheduled invocation", function.spec.logical_id)
                self._send_failure(function, event, err)
            else:
                log.info("%s <- schedule fired", function.spec.logical_id)
        return [event for _, event in calls]
