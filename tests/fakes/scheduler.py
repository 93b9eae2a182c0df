"""An in-memory EventBridge Scheduler client: schedule groups and schedules, stored, never fired.

Why: every agent with a `schedule` owns one schedule (engram/runs/schedules.py), and the local
ScheduleLoop (local/schedules.py) lists and reads them to fire the heartbeat function; this answers
in microseconds with the same parameter validation (botocore's own), exception classes
(`client.exceptions.ResourceNotFoundException`...) and paginators as a real client.

Like the service (checked against moto by tests/contract): CreateSchedule (ConflictException when
it exists, ResourceNotFoundException when its group does not), UpdateSchedule (replaces the whole
definition; ResourceNotFoundException when missing), GetSchedule (the definition plus Arn,
CreationDate, LastModificationDate, the default RetryPolicy and timezone), DeleteSchedule,
ListSchedules (GroupName, NamePrefix, State, paging), and the schedule-group calls (a "default"
group always exists).

Unlike moto, which stores any ScheduleExpression, the expression is checked as the service does
(ValidationException): `rate(N unit)` with N >= 1 and a unit of minute(s), hour(s) or day(s);
`cron()` with six fields in their ranges (names, lists, ranges, steps, `?` in exactly one of
day-of-month and day-of-week, L/W in day-of-month, L/# in day-of-week); `at(yyyy-mm-ddThh:mm:ss)`.
Also unlike moto, creating a schedule group that exists is a ConflictException (moto replaces it,
dropping its schedules), and CreateSchedule in a missing group is a ResourceNotFoundException
(moto fails with a KeyError).
"""

from __future__ import annotations

import base64
import copy
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from botocore.exceptions import ClientError
from botocore.model import ServiceModel

from tests.fakes import client_error
from tests.fakes._botocore import FakeClient, service
from tests.fakes._botocore import ok as _ok

SERVICE = "scheduler"
ACCOUNT_ID = "123456789012"  # moto's default account, as local/resources.py
DEFAULT_GROUP = "default"
DEFAULT_RETRY_POLICY = {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
_NAME = re.compile(r"^[0-9a-zA-Z-_.]{1,64}$")


# --------------------------------------------------------------------------- botocore's view of the service
def _model() -> tuple[ServiceModel, Any, dict[str, Any]]:
    return service(SERVICE)


_STATUS = {"ConflictException": 409, "ResourceNotFoundException": 404, "ValidationException": 400}


def _error(operation: str, code: str, message: str) -> ClientError:
    err = client_error(operation, code, message, status=_STATUS.get(code, 400))
    cls = _model()[1].from_code(code)
    return cls(err.response, operation) if cls is not ClientError else err


# --------------------------------------------------------------------------- schedule expressions
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (low, high, names, special forms allowed as a whole item)
_FIELDS: tuple[tuple[int, int, tuple[str, ...], re.Pattern[str] | None], ...] = (
    (0, 59, (), None),  # minutes
    (0, 23, (), None),  # hours
    (1, 31, (), re.compile(r"^(L|LW|L-\d{1,2}|\d{1,2}W)$")),  # day-of-month
    (1, 12, _MONTHS, None),  # month
    (1, 7, _DAYS, re.compile(r"^(L|[1-7A-Z]{1,3}L|[1-7A-Z]{1,3}#[1-5])$")),  # day-of-week
    (1970, 2199, (), None),  # year
)


def _value(text: str, low: int, high: int, names: tuple[str, ...]) -> int | None:
    upper = text.upper()
    if upper in names:
        return names.index(upper) + 1
    if text.isdigit() and low <= int(text) <= high:
        return int(text)
    return None


def _cron_field(text: str, index: int) -> bool:
    low, high, names, special = _FIELDS[index]
    for item in text.split(","):
        if special is not None and special.match(item.upper()):
            day = item.upper().split("#")[0]  # 6L, 15W, MON#2: the day must be in range; L, LW, L-3 have none
            if not day.startswith("L") and _value(day.rstrip("LW"), low, high, names) is None:
                return False
            continue
        part, slash, step = item.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            return False
        if part == "*":
            continue
        start, dash, end = part.partition("-")
        first = _value(start, low, high, names)
        last = _value(end, low, high, names) if dash else first
        if first is None or last is None or (dash and first > last):
            return False
    return True


def valid_expression(expression: str) -> bool:
    """Whether EventBridge Scheduler accepts `expression` (rate, cron or at)."""
    rate = _RATE.match(expression)
    if rate:
        return int(rate.group(1)) >= 1
    at = _AT.match(expression)
    if at:
        try:
            datetime.fromisoformat(at.group(1))
        except ValueError:
            return False
        return True
    cron = _CRON.match(expression)
    if not cron:
        return False
    fields = cron.group(1).split(" ")
    if len(fields) != 6 or "" in fields:
        return False
    day_of_month, day_of_week = fields[2], fields[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        return False  # exactly one of the two must be `?`
    return all(text == "?" and index in (2, 4) or _cron_field(text, index) for index, text in enumerate(fields))


# --------------------------------------------------------------------------- state
@dataclass
class _Group:
    name: str
    arn: str
    created: datetime | None
    tags: list[dict[str, str]] = field(default_factory=list)
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)


# Optional CreateSchedule/UpdateSchedule parameters stored as given.
_DEFINITION = (
    "Description",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "StartDate",
    "EndDate",
    "FlexibleTimeWindow",
    "Target",
    "State",
    "KmsKeyArn",
    "ActionAfterCompletion",
)


class FakeScheduler(FakeClient):
    SERVICE = SERVICE

    """What `boto3.client("scheduler")` returns inside `fake_aws()`. Thread-safe (one lock)."""

    def __init__(self, region: str = "us-east-1"):
        super().__init__(region)
        self._lock = threading.Lock()
        self._groups: dict[str, _Group] = {DEFAULT_GROUP: _Group(DEFAULT_GROUP, self._group_arn(DEFAULT_GROUP), None)}

    # ------------------------------------------------------------------ client plumbing
    def _group_arn(self, name: str) -> str:
        return f"arn:aws:scheduler:{self.region}:{ACCOUNT_ID}:schedule-group/{name}"

    def _group(self, operation: str, name: str | None) -> _Group:
        group = self._groups.get(name or DEFAULT_GROUP)
        if group is None:
            raise _error(operation, "ResourceNotFoundException", f"Schedule group {name} does not exist.")
        return group

    @staticmethod
    def _page(items: list[Any], params: dict[str, Any], limit: int) -> tuple[list[Any], str | None]:
        start = int(base64.b64decode(params["NextToken"]).decode()) if params.get("NextToken") else 0
        size = int(params.get("MaxResults", limit))
        end = start + size
        return items[start:end], base64.b64encode(str(end).encode()).decode() if end < len(items) else None

    # ------------------------------------------------------------------ schedule groups
    def create_schedule_group(self, **params: Any) -> dict[str, Any]:
        self._validate("CreateScheduleGroup", params)
        name = params["Name"]
        if not _NAME.match(name):
            raise _error("CreateScheduleGroup", "ValidationException", f"Invalid schedule group name {name}.")
        with self._lock:
            if name in self._groups:
                raise _error("CreateScheduleGroup", "ConflictException", f"Schedule group {name} already exists.")
            self._groups[name] = _Group(name, self._group_arn(name), datetime.now(UTC), copy.deepcopy(params.get("Tags", [])))
            return _ok({"ScheduleGroupArn": self._groups[name].arn})

    @staticmethod
    def _group_summary(group: _Group) -> dict[str, Any]:
        out: dict[str, Any] = {"Arn": group.arn, "Name": group.name, "State": "ACTIVE"}
        if group.created is not None:
            out.update(CreationDate=group.created, LastModificationDate=group.created)
        return out

    def get_schedule_group(self, **params: Any) -> dict[str, Any]:
        self._validate("GetScheduleGroup", params)
        with self._lock:
            return _ok(self._group_summary(self._group("GetScheduleGroup", params["Name"])))

    def list_schedule_groups(self, **params: Any) -> dict[str, Any]:
        self._validate("ListScheduleGroups", params)
        prefix = params.get("NamePrefix", "")
        with self._lock:
            groups = [self._group_summary(g) for g in self._groups.values() if g.name.startswith(prefix)]
        page, token = self._page(groups, params, 50)
        return _ok({"ScheduleGroups": page, **({"NextToken": token} if token else {})})

    def delete_schedule_group(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteScheduleGroup", params)
        name = params["Name"]
        with self._lock:
            self._group("DeleteScheduleGroup", name)
            if name == DEFAULT_GROUP:
                raise _error("DeleteScheduleGroup", "ValidationException", "The default schedule group cannot be deleted.")
            del self._groups[name]  # with its schedules, as the service does (eventually)
        return _ok({})

    # ------------------------------------------------------------------ schedules
    def _definition(self, operation: str, params: dict[str, Any], group: _Group) -> dict[str, Any]:
        name, expression = params["Name"], params["ScheduleExpression"]
        if not _NAME.match(name):
            raise _error(operation, "ValidationException", f"Invalid schedule name {name}.")
        if not valid_expression(expression):
            raise _error(operation, "ValidationException", f"Invalid Schedule Expression {expression}.")
        timezone = params.get("ScheduleExpressionTimezone") or "UTC"
        if timezone != "UTC":
            try:
                ZoneInfo(timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise _error(operation, "ValidationException", f"Invalid time zone {timezone}.") from None
        window = params["FlexibleTimeWindow"]
        if window.get("Mode") not in ("OFF", "FLEXIBLE") or (window["Mode"] == "FLEXIBLE") != (
            "MaximumWindowInMinutes" in window
        ):
            raise _error(operation, "ValidationException", "Invalid FlexibleTimeWindow.")
        definition = {k: copy.deepcopy(params[k]) for k in _DEFINITION if k in params}
        definition.update(
            Arn=f"arn:aws:scheduler:{self.region}:{ACCOUNT_ID}:schedule/{group.name}/{name}",
            Name=name,
            GroupName=group.name,
            ScheduleExpressionTimezone=timezone,
            State=params.get("State") or "ENABLED",
        )
        definition["Target"].setdefault("RetryPolicy", dict(DEFAULT_RETRY_POLICY))
        return definition

    def create_schedule(self, **params: Any) -> dict[str, Any]:
        self._validate("CreateSchedule", params)
        with self._lock:
            group = self._group("CreateSchedule", params.get("GroupName"))
            if params["Name"] in group.schedules:
                raise _error("CreateSchedule", "ConflictException", f"Schedule {params['Name']} already exists.")
            definition = self._definition("CreateSchedule", params, group)
            definition["CreationDate"] = definition["LastModificationDate"] = datetime.now(UTC)
            group.schedules[params["Name"]] = definition
            return _ok({"ScheduleArn": definition["Arn"]})

    def _schedule(self, operation: str, params: dict[str, Any]) -> tuple[_Group, dict[str, Any]]:
        group = self._group(operation, params.get("GroupName"))
        schedule = group.schedules.get(params["Name"])
        if schedule is None:
            raise _error(operation, "ResourceNotFoundException", f"Schedule {params['Name']} does not exist.")
        return group, schedule

    def update_schedule(self, **params: Any) -> dict[str, Any]:
        """Replaces the whole definition: what the call leaves out goes back to its default."""
        self._validate("UpdateSchedule", params)
        with self._lock:
            group, current = self._schedule("UpdateSchedule", params)
            definition = self._definition("UpdateSchedule", params, group)
            definition["CreationDate"] = current["CreationDate"]
            definition["LastModificationDate"] = max(datetime.now(UTC), current["LastModificationDate"])
            group.schedules[params["Name"]] = definition
            return _ok({"ScheduleArn": definition["Arn"]})

    def get_schedule(self, **params: Any) -> dict[str, Any]:
        self._validate("GetSchedule", params)
        with self._lock:
            return _ok(copy.deepcopy(self._schedule("GetSchedule", params)[1]))

    def delete_schedule(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteSchedule", params)
        with self._lock:
            group, _ = self._schedule("DeleteSchedule", params)
            del group.schedules[params["Name"]]
        return _ok({})

    def list_schedules(self, **params: Any) -> dict[str, Any]:
        self._validate("ListSchedules", params)
        prefix, state = params.get("NamePrefix", ""), params.get("State")
        with self._lock:
            wanted = params.get("GroupName")
            groups = [g for g in self._groups.values() if wanted in (None, g.name)]  # an unknown group lists nothing
            summaries = [
                {
                    "Arn": s["Arn"],
                    "Name": s["Name"],
                    "GroupName": s["GroupName"],
                    "State": s["State"],
                    "CreationDate": s["CreationDate"],
                    "LastModificationDate": s["LastModificationDate"],
                    "Target": {"Arn": s["Target"]["Arn"]},
                }
                for g in groups
                for s in sorted(g.schedules.values(), key=lambda s: s["Name"])
                if s["Name"].startswith(prefix) and state in (None, s["State"])
            ]
        page, token = self._page(summaries, params, 100)
        return _ok({"Schedules": page, **({"NextToken": token} if token else {})})
