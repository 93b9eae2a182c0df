"""The local EventBridge Scheduler: expression parsing, due times, and the loop against moto."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from engram.runs.expressions import Cron, Rate, UnsupportedExpression, aws_weekday, parse_expression
from local.resources import LOCAL_HEARTBEAT_FUNCTION_ARN, LOCAL_SCHEDULER_ROLE_ARN, create_resources
from local.schedules import ScheduleLoop, due_time, fill_input, next_fire_times
from local.template import load_template

T0 = datetime(2025, 1, 1, 10, 0, 30, tzinfo=UTC)  # a Wednesday


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --------------------------------------------------------------------------- rate()
@pytest.mark.parametrize(
    ("expression", "every"),
    [
        ("rate(1 minute)", timedelta(minutes=1)),
        ("rate(5 minutes)", timedelta(minutes=5)),
        ("rate(1 hour)", timedelta(hours=1)),
        ("rate(12 hours)", timedelta(hours=12)),
        ("rate(1 day)", timedelta(days=1)),
        ("rate(3 days)", timedelta(days=3)),
    ],
)
def test_rate_units(expression, every):
    assert parse_expression(expression) == Rate(every)


def test_rate_counts_from_the_anchor_and_fires_one_interval_after_it():
    assert next_fire_times("rate(5 minutes)", T0, count=3) == [
        T0 + timedelta(minutes=5),
        T0 + timedelta(minutes=10),
        T0 + timedelta(minutes=15),
    ]
    assert due_time("rate(5 minutes)", T0, T0 + timedelta(minutes=4, seconds=59)) is None
    assert due_time("rate(5 minutes)", T0, T0 + timedelta(minutes=5)) == T0 + timedelta(minutes=5)
    assert due_time("rate(5 minutes)", T0, T0 + timedelta(minutes=7)) == T0 + timedelta(minutes=5)


@pytest.mark.parametrize("bad", ["rate(0 minutes)", "rate(5 weeks)", "rate(five minutes)", "rate(5)"])
def test_bad_rates_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_expression(bad)


# --------------------------------------------------------------------------- cron()
def test_cron_fields_numbers_lists_ranges_steps_and_names():
    cron = parse_expression("cron(0/15 9-17/4 ? JAN,MAR-APR MON-FRI 2025-2026)")
    assert isinstance(cron, Cron)
    assert cron.minutes == (0, 15, 30, 45)
    assert cron.hours == (9, 13, 17)
    assert cron.days_of_month is None
    assert cron.months == (1, 3, 4)
    assert cron.days_of_week == (2, 3, 4, 5, 6)  # MON..FRI in AWS numbering
    assert cron.years == (2025, 2026)
    assert parse_expression("cron(*/20 * 1,15 * ? *)").minutes == (0, 20, 40)
    assert parse_expression("cron(0 12 ? dec sun *)").months == (12,)  # names are case-insensitive


def test_weekdays_are_numbered_from_sunday():
    assert [aws_weekday(at(2025, 1, d).date()) for d in range(5, 12)] == [1, 2, 3, 4, 5, 6, 7]  # Sun 5 Jan .. Sat 11 Jan
    assert parse_expression("cron(0 0 ? * 1 *)") == parse_expression("cron(0 0 ? * SUN *)")
    # 7 = Saturday: the next firings after Wednesday 1 January are Saturdays
    assert [t.date().isoformat() for t in next_fire_times("cron(30 8 ? * 7 *)", T0, count=2)] == ["2025-01-04", "2025-01-11"]


def test_cron_next_firings_in_utc():
    assert next_fire_times("cron(0 12 ? * MON-FRI *)", T0, count=4) == [
        at(2025, 1, 1, 12),
        at(2025, 1, 2, 12),
        at(2025, 1, 3, 12),
        at(2025, 1, 6, 12),  # the weekend is skipped
    ]
    assert next_fire_times("cron(*/30 9-10 1,15 JAN-FEB ? 2025)", T0, count=5) == [
        at(2025, 1, 1, 10, 30),
        at(2025, 1, 15, 9, 0),
        at(2025, 1, 15, 9, 30),
        at(2025, 1, 15, 10, 0),
        at(2025, 1, 15, 10, 30),
    ]
    assert next_fire_times("cron(0 0 1 1 ? 2024)", T0) == []  # only in the past
    assert next_fire_times("cron(0 0 31 2 ? *)", T0) == []  # never


def test_cron_only_counts_firings_after_the_anchor():
    # created at 10:00:30: the 10:00 firing of that day is not the schedule's
    assert due_time("cron(0 10 * * ? *)", T0, at(2025, 1, 1, 10, 5)) is None
    assert due_time("cron(0 10 * * ? *)", T0, at(2025, 1, 2, 10, 0)) == at(2025, 1, 2, 10, 0)
    assert due_time("cron(0 10 * * ? *)", T0, at(2025, 1, 2, 9, 59)) is None


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 12 L * ? *)",
        "cron(0 12 15W * ? *)",
        "cron(0 12 LW * ? *)",
        "cron(0 12 ? * 6L *)",
        "cron(0 12 ? * 3#2 *)",
        "cron(0 12 ? * MON#1 *)",
        "cron(0 12 L-2 * ? *)",
        "at(2025-01-01T00:00:00)",
    ],
)
def test_l_w_hash_and_one_time_schedules_are_unsupported(expression):
    with pytest.raises(UnsupportedExpression):
        parse_expression(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 12 * * * *)",  # one of day-of-month / day-of-week must be ?
        "cron(0 12 ? * ? *)",
        "cron(0 12 * *)",
        "cron(60 12 * * ? *)",
        "cron(0 24 * * ? *)",
        "cron(0 12 0 * ? *)",
        "cron(0 12 ? * 8 *)",
        "cron(0 12 ? FOO * *)",
        "cron(5-1 * * * ? *)",
        "cron(*/0 * * * ? *)",
        "cron(? 12 * * ? *)",
        "every hour",
    ],
)
def test_invalid_crons_are_rejected(expression):
    with pytest.raises(ValueError):
        parse_expression(expression)


# --------------------------------------------------------------------------- due logic
def test_a_due_time_fires_once_and_a_late_loop_fires_only_the_latest():
    every_minute = "rate(1 minute)"
    first = due_time(every_minute, T0, T0 + timedelta(seconds=61))
    assert first == T0 + timedelta(minutes=1)
    assert due_time(every_minute, T0, T0 + timedelta(seconds=90), last_fired=first) is None
    # ten minutes behind: one firing, the most recent
    assert due_time(every_minute, T0, T0 + timedelta(minutes=10, seconds=5), last_fired=first) == T0 + timedelta(minutes=10)


def test_fill_input_replaces_the_context_attributes():
    raw = json.dumps(
        {
            "t": "<aws.scheduler.scheduled-time>",
            "e": "<aws.scheduler.execution-id>",
            "a": "<aws.scheduler.attempt-number>",
            "s": "<aws.scheduler.schedule-arn>",
        }
    )
    event = fill_input(raw, scheduled=at(2025, 3, 4, 5, 6, 7), schedule_arn="arn:s")
    assert event["t"] == "2025-03-04T05:06:07Z" and event["a"] == "1" and event["s"] == "arn:s"
    assert event["e"] and "<" not in event["e"]
    assert fill_input(raw, scheduled=T0, schedule_arn="x")["e"] != event["e"]  # a fresh id per firing
    assert fill_input(None, scheduled=T0, schedule_arn="x") == {}


# --------------------------------------------------------------------------- the loop against moto
class FakeFunction:
    def __init__(self, logical_id: str, fail: bool = False, on_failure_queue: str | None = None):
        self.spec = SimpleNamespace(logical_id=logical_id, on_failure_queue=on_failure_queue, rules=())
        self.function_name = f"engram-local-{logical_id}"
        self.events: list = []
        self.fail = fail

    def invoke(self, event):
        self.events.append(event)
        if self.fail:
            raise RuntimeError("boom")
        return {"status": "succeeded"}


class FakeFunctions:
    def __init__(self, *functions: FakeFunction):
        self.by_id = {f.spec.logical_id: f for f in functions}

    def __iter__(self):
        return iter(self.by_id.values())

    def __getitem__(self, logical_id):
        return self.by_id[logical_id]


@pytest.fixture
def moto_stack():
    with mock_aws():
        resources = create_resources(load_template())
        heartbeat = FakeFunction("HeartbeatFunction", on_failure_queue="FailedFiringQueue")
        loop = ScheduleLoop(FakeFunctions(heartbeat, FakeFunction("ApiFunction")), resources, interval=3600)
        yield SimpleNamespace(resources=resources, heartbeat=heartbeat, loop=loop, client=boto3.client("scheduler"))


def _create(s, name: str, expression: str, *, state: str = "ENABLED", target_arn: str = LOCAL_HEARTBEAT_FUNCTION_ARN) -> dict:
    group = s.resources.schedule_group()
    s.client.create_schedule(
        Name=name,
        GroupName=group,
        ScheduleExpression=expression,
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        State=state,
        Target={
            "Arn": target_arn,
            "RoleArn": LOCAL_SCHEDULER_ROLE_ARN,
            "Input": json.dumps(
                {
                    "agentId": name,
                    "when": "<aws.scheduler.scheduled-time>",
                    "id": "<aws.scheduler.execution-id>",
                    "attempt": "<aws.scheduler.attempt-number>",
                }
            ),
        },
    )
    return s.client.get_schedule(Name=name, GroupName=group)


def test_the_schedule_group_is_created_from_the_template(moto_stack):
    groups = {g["Name"] for g in moto_stack.client.list_schedule_groups()["ScheduleGroups"]}
    assert moto_stack.resources.schedule_group() == "engram-local-schedule-group" in groups


def test_a_rate_schedule_fires_the_heartbeat_function_with_its_filled_input(moto_stack):
    created = _create(moto_stack, "a1", "rate(1 minute)")["CreationDate"]
    assert moto_stack.loop.tick(created + timedelta(seconds=30)) == []
    fired = moto_stack.loop.tick(created + timedelta(seconds=61))
    assert fired == moto_stack.heartbeat.events and len(fired) == 1
    event = fired[0]
    expected_time = (created + timedelta(minutes=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (event["agentId"], event["when"], event["attempt"]) == ("a1", expected_time, "1")
    assert event["id"] and "<" not in event["id"]
    # the same due time is never fired twice; the next one is
    assert moto_stack.loop.tick(created + timedelta(seconds=100)) == []
    assert len(moto_stack.loop.tick(created + timedelta(seconds=121))) == 1


def test_a_loop_that_fell_behind_fires_once(moto_stack):
    created = _create(moto_stack, "a1", "rate(1 minute)")["CreationDate"]
    (event,) = moto_stack.loop.tick(created + timedelta(minutes=30, seconds=10))
    assert event["when"] == (created + timedelta(minutes=30)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert moto_stack.loop.tick(created + timedelta(minutes=30, seconds=20)) == []


def test_an_updated_rate_counts_from_the_update(moto_stack):
    _create(moto_stack, "a1", "rate(1 minute)")
    group = moto_stack.resources.schedule_group()
    current = moto_stack.client.get_schedule(Name="a1", GroupName=group)
    moto_stack.client.update_schedule(
        Name="a1",
        GroupName=group,
        ScheduleExpression="rate(5 minutes)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target=current["Target"],
        State="ENABLED",
    )
    updated = moto_stack.client.get_schedule(Name="a1", GroupName=group)["LastModificationDate"]
    assert moto_stack.loop.tick(updated + timedelta(minutes=4, seconds=59)) == []
    assert len(moto_stack.loop.tick(updated + timedelta(minutes=5))) == 1


def test_a_cron_schedule_fires_at_its_next_time(moto_stack):
    created = _create(moto_stack, "a1", "cron(0 9 ? * MON-FRI *)")["CreationDate"]
    first, second = next_fire_times("cron(0 9 ? * MON-FRI *)", created, count=2)
    assert moto_stack.loop.tick(first - timedelta(seconds=1)) == []
    (event,) = moto_stack.loop.tick(first + timedelta(seconds=3))
    assert event["when"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert moto_stack.loop.tick(second - timedelta(minutes=1)) == []
    assert [e["when"] for e in moto_stack.loop.tick(second)] == [second.strftime("%Y-%m-%dT%H:%M:%SZ")]


def test_disabled_unsupported_and_foreign_targets_are_skipped(moto_stack, caplog):
    created = _create(moto_stack, "off", "rate(1 minute)", state="DISABLED")["CreationDate"]
    _create(moto_stack, "last-day", "cron(0 12 L * ? *)")
    _create(moto_stack, "elsewhere", "rate(1 minute)", target_arn="arn:aws:lambda:us-east-1:123456789012:function:other")
    _create(moto_stack, "on", "rate(1 minute)")
    with caplog.at_level(logging.WARNING, logger="local"):
        fired = moto_stack.loop.tick(created + timedelta(days=40))
        moto_stack.loop.tick(created + timedelta(days=41))
    assert [e["agentId"] for e in fired] == ["on"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("last-day" in w for w in warnings) == 1  # once, not every tick
    assert sum("elsewhere" in w for w in warnings) == 1


def test_a_target_named_by_a_functions_own_arn_is_invoked_too(moto_stack):
    arn = "arn:aws:lambda:us-east-1:123456789012:function:engram-local-ApiFunction"
    created = _create(moto_stack, "direct", "rate(1 minute)", target_arn=arn)["CreationDate"]
    assert len(moto_stack.loop.tick(created + timedelta(seconds=61))) == 1
    assert moto_stack.loop.functions["ApiFunction"].events and not moto_stack.heartbeat.events


def test_a_failing_function_is_logged_and_the_loop_goes_on(moto_stack, caplog):
    moto_stack.heartbeat.fail = True
    created = _create(moto_stack, "a1", "rate(1 minute)")["CreationDate"]
    with caplog.at_level(logging.ERROR, logger="local"):
        assert len(moto_stack.loop.tick(created + timedelta(seconds=61))) == 1
    assert any("failed a scheduled invocation" in r.getMessage() for r in caplog.records)
    assert len(moto_stack.loop.tick(created + timedelta(seconds=121))) == 1


def test_a_failed_invocation_goes_to_the_functions_on_failure_queue_as_lambdas_record(moto_stack):
    moto_stack.heartbeat.fail = True
    created = _create(moto_stack, "a1", "rate(1 minute)")["CreationDate"]
    (event,) = moto_stack.loop.tick(created + timedelta(seconds=61))
    sqs = boto3.client("sqs")
    out = sqs.receive_message(QueueUrl=moto_stack.resources.queue_url("FailedFiringQueue"), MaxNumberOfMessages=10)
    (message,) = out["Messages"]
    record = json.loads(message["Body"])
    assert record["requestPayload"] == event
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["functionArn"].endswith(":function:engram-local-HeartbeatFunction:$LATEST")
    assert record["responsePayload"]["errorType"] == "RuntimeError" and record["responsePayload"]["errorMessage"] == "boom"
    # a function without an on-failure destination only logs
    assert load_template().function("ApiFunction").on_failure_queue is None
    assert load_template().function("HeartbeatFunction").on_failure_queue == "FailedFiringQueue"


def test_a_deleted_schedule_stops_firing(moto_stack):
    created = _create(moto_stack, "a1", "rate(1 minute)")["CreationDate"]
    moto_stack.client.delete_schedule(Name="a1", GroupName=moto_stack.resources.schedule_group())
    assert moto_stack.loop.tick(created + timedelta(minutes=5)) == []


def test_start_and_stop_run_the_loop_in_the_background(moto_stack):
    moto_stack.loop.interval = 0.01
    moto_stack.loop.start()
    moto_stack.loop.stop()
    assert moto_stack.loop._thread is None


# --------------------------------------------------------------------------- the template's own rules
def test_the_template_s_schedule_rules_fire_locally_on_their_rate(moto_stack):
    template = load_template()
    (rule,) = template.function("HeartbeatFunction").rules
    assert (rule.event_name, rule.expression, json.loads(rule.input or "")) == (
        "SweepStaleRuns",
        "rate(5 minutes)",
        {"source": "engram.sweep"},
    )
    sweeper = FakeFunction("HeartbeatFunction")
    sweeper.spec.rules = (rule,)
    loop = ScheduleLoop(FakeFunctions(sweeper), moto_stack.resources, interval=3600)
    start = loop._created
    assert loop.tick(start + timedelta(minutes=4)) == []
    assert loop.tick(start + timedelta(minutes=5, seconds=1)) == [{"source": "engram.sweep"}]
    assert loop.tick(start + timedelta(minutes=6)) == []  # once per period
    assert loop.tick(start + timedelta(minutes=10, seconds=1)) == [{"source": "engram.sweep"}]
