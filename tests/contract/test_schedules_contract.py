"""ScheduleRepository (one EventBridge Scheduler schedule per agent) and the Scheduler calls of the
local ScheduleLoop, on the fake and on moto.

Two known differences are pinned as strict xfails on moto, so they show up when moto changes:
moto stores any ScheduleExpression (the service, and the fake, reject invalid ones with a
ValidationException), and moto's CreateSchedule raises a KeyError for a missing group (the
service, and the fake, answer ResourceNotFoundException)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from engram.kernel.errors import BadRequest
from engram.runs.schedules import RETRY_POLICY
from local.resources import LOCAL_HEARTBEAT_FUNCTION_ARN, LOCAL_SCHEDULER_ROLE_ARN
from local.schedules import ScheduleLoop

T = "tenant-1"


@pytest.fixture
def store(backend) -> Any:
    return backend.stores.schedules


@pytest.fixture
def scheduler(backend) -> Any:
    return boto3.client("scheduler", region_name=backend.resources.region)


@pytest.fixture
def group(backend) -> str:
    return str(backend.settings.schedule_group)


def _moto_differs(request: pytest.FixtureRequest, backend: Any, reason: str, raises: type[BaseException] | None = None) -> None:
    if backend.kind == "moto":
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason, raises=raises))


def _target(**extra: Any) -> dict[str, Any]:
    return {"Arn": LOCAL_HEARTBEAT_FUNCTION_ARN, "RoleArn": LOCAL_SCHEDULER_ROLE_ARN, **extra}


# --------------------------------------------------------------------------- ScheduleRepository
def test_put_creates_the_agents_schedule(backend, store, group):
    store.put(T, "agent-1", "rate(1 hour)")
    schedule = store.get("agent-1")
    settings = backend.settings
    assert (schedule["Name"], schedule["GroupName"]) == ("agent-1", group) and group == backend.resources.schedule_group()
    assert schedule["Arn"] == f"arn:aws:scheduler:us-east-1:123456789012:schedule/{group}/agent-1"
    assert (schedule["ScheduleExpression"], schedule["ScheduleExpressionTimezone"], schedule["State"]) == (
        "rate(1 hour)",
        "UTC",
        "ENABLED",
    )
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"} and "agent-1" in schedule["Description"]
    target = schedule["Target"]
    assert (target["Arn"], target["RoleArn"]) == (settings.heartbeat_function_arn, settings.scheduler_role_arn)
    assert target["RetryPolicy"] == RETRY_POLICY and target["DeadLetterConfig"] == {"Arn": settings.scheduler_dlq_arn}
    assert json.loads(target["Input"])["agentId"] == "agent-1" and json.loads(target["Input"])["tenant"] == T
    assert isinstance(schedule["CreationDate"], datetime) and schedule["CreationDate"].tzinfo is not None
    assert schedule["LastModificationDate"] == schedule["CreationDate"]


def test_put_again_updates_the_same_schedule(store, scheduler, group):
    store.put(T, "agent-1", "rate(1 hour)")
    created = store.get("agent-1")
    store.put(T, "agent-1", "cron(0 9 ? * MON-FRI *)")
    updated = store.get("agent-1")
    assert updated["ScheduleExpression"] == "cron(0 9 ? * MON-FRI *)" and updated["Arn"] == created["Arn"]
    assert updated["CreationDate"] == created["CreationDate"] and updated["LastModificationDate"] >= created["CreationDate"]
    assert [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]] == ["agent-1"]


def test_delete_removes_it_and_a_missing_one_is_false(store):
    store.put(T, "agent-1", "rate(1 hour)")
    assert store.delete("agent-1") is True
    assert store.get("agent-1") is None
    assert store.delete("agent-1") is False
    assert store.get("never") is None


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 9 * * * *)",
        "rate(0 minutes)",
        "cron(0 9 ? * MON-FRI)",
        "cron(60 9 ? * MON-FRI *)",
        "rate(2 weeks)",
        "at(2030-13-01T00:00:00)",
    ],
)
def test_an_expression_scheduler_rejects_is_a_bad_request(backend, store, expression):
    """The store checks expressions itself (engram.runs.expressions), so moto, which stores any
    expression, answers like Scheduler: one 400 `invalid_schedule` everywhere."""
    with pytest.raises(BadRequest) as err:
        store.put(T, "agent-1", expression)
    assert (err.value.code, err.value.field, err.value.status) == ("invalid_schedule", "schedule", 400)
    assert expression in err.value.message
    assert store.get("agent-1") is None


@pytest.mark.parametrize("expression", ["rate(0 minutes)", "cron(0 9 * * * *)"])
def test_the_scheduler_client_itself_refuses_a_bad_expression(request, backend, scheduler, group, expression):
    _moto_differs(request, backend, "moto stores any ScheduleExpression (the store checks them first)")
    with pytest.raises(ClientError) as err:
        scheduler.create_schedule(
            Name="s1", GroupName=group, ScheduleExpression=expression, FlexibleTimeWindow={"Mode": "OFF"}, Target=_target()
        )
    assert err.value.response["Error"]["Code"] == "ValidationException"


def test_an_invalid_update_leaves_the_schedule_as_it_was(store):
    store.put(T, "agent-1", "rate(1 hour)")
    with pytest.raises(BadRequest):
        store.put(T, "agent-1", "cron(0 9 * * * *)")
    assert store.get("agent-1")["ScheduleExpression"] == "rate(1 hour)"


@pytest.mark.parametrize(
    "expression",
    [
        "rate(1 minute)",
        "rate(5 minutes)",
        "rate(7 days)",
        "cron(0 9 * * ? *)",
        "cron(0/15 9-17 ? JAN,MAR-APR MON-FRI 2025-2030)",
        "cron(0 18 L * ? *)",
        "cron(0 10 ? * 6#3 *)",
        "cron(0 12 15W * ? *)",
        "cron(0 12 ? dec sun *)",
        "at(2030-01-01T09:00:00)",
    ],
)
def test_valid_expressions_are_stored_as_given(store, expression):
    store.put(T, "agent-1", expression)
    assert store.get("agent-1")["ScheduleExpression"] == expression


# --------------------------------------------------------------------------- the Scheduler calls
def test_list_schedules_filters_by_group_and_prefix(store, scheduler, group):
    for agent in ("ag-1", "ag-2", "other"):
        store.put(T, agent, "rate(1 hour)")
    scheduler.create_schedule(
        Name="elsewhere", ScheduleExpression="rate(1 hour)", FlexibleTimeWindow={"Mode": "OFF"}, Target=_target()
    )
    listed = scheduler.list_schedules(GroupName=group)["Schedules"]
    assert sorted(s["Name"] for s in listed) == ["ag-1", "ag-2", "other"]
    assert sorted(s["Name"] for s in scheduler.list_schedules(GroupName=group, NamePrefix="ag-")["Schedules"]) == ["ag-1", "ag-2"]
    summary = next(s for s in listed if s["Name"] == "ag-1")
    assert (summary["GroupName"], summary["State"], summary["Target"]) == (
        group,
        "ENABLED",
        {"Arn": LOCAL_HEARTBEAT_FUNCTION_ARN},
    )
    assert summary["Arn"].endswith(f":schedule/{group}/ag-1") and isinstance(summary["LastModificationDate"], datetime)
    assert [s["Name"] for s in scheduler.list_schedules(GroupName="default")["Schedules"]] == ["elsewhere"]


def test_the_schedule_group_of_the_template_exists_beside_default(backend, scheduler, group):
    groups = {g["Name"]: g for g in scheduler.list_schedule_groups()["ScheduleGroups"]}
    assert set(groups) == {"default", group} and group == "engram-local-schedule-group"
    assert groups[group]["Arn"] == f"arn:aws:scheduler:us-east-1:123456789012:schedule-group/{group}"
    assert groups[group]["State"] == "ACTIVE"


def test_missing_schedules_are_resource_not_found_and_duplicates_conflict(scheduler, group):
    definition = {
        "Name": "s1",
        "GroupName": group,
        "ScheduleExpression": "rate(1 hour)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": _target(),
    }
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.update_schedule(**definition)
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.get_schedule(Name="s1", GroupName="no-such-group")
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.delete_schedule(Name="s1", GroupName=group)
    arn = scheduler.create_schedule(**definition)["ScheduleArn"]
    assert arn.endswith(f"/{group}/s1")
    with pytest.raises(scheduler.exceptions.ConflictException) as err:
        scheduler.create_schedule(**definition)
    assert err.value.response["Error"]["Code"] == "ConflictException"


def test_a_schedule_in_a_missing_group_is_resource_not_found(request, backend, scheduler):
    _moto_differs(request, backend, "moto's CreateSchedule raises KeyError for a missing group", raises=KeyError)
    with pytest.raises(ClientError) as err:
        scheduler.create_schedule(
            Name="s1",
            GroupName="no-such-group",
            ScheduleExpression="rate(1 hour)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target=_target(),
        )
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_update_replaces_the_definition_and_defaults_come_back(scheduler, group):
    scheduler.create_schedule(
        Name="s1",
        GroupName=group,
        ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"},
        State="DISABLED",
        Description="first",
        Target=_target(Input="{}"),
    )
    first = scheduler.get_schedule(Name="s1", GroupName=group)
    assert first["Target"]["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}  # the default
    assert (first["State"], first["Description"]) == ("DISABLED", "first")
    scheduler.update_schedule(
        Name="s1",
        GroupName=group,
        ScheduleExpression="rate(5 minutes)",
        FlexibleTimeWindow={"Mode": "OFF"},
        State="ENABLED",
        Target=_target(),
    )
    second = scheduler.get_schedule(Name="s1", GroupName=group)
    assert (second["ScheduleExpression"], second["State"], "Input" in second["Target"]) == ("rate(5 minutes)", "ENABLED", False)
    assert second["CreationDate"] == first["CreationDate"] and second["LastModificationDate"] >= first["LastModificationDate"]


class _Heartbeat:
    """The heartbeat function, as ScheduleLoop sees it: records what it is invoked with."""

    spec = SimpleNamespace(logical_id="HeartbeatFunction")
    function_name = "engram-local-HeartbeatFunction"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def invoke(self, event: Any) -> None:
        self.events.append(event)


class _Functions:
    def __init__(self, *functions: _Heartbeat) -> None:
        self.by_id = {f.spec.logical_id: f for f in functions}

    def __iter__(self) -> Any:
        return iter(self.by_id.values())

    def __getitem__(self, logical_id: str) -> _Heartbeat:
        return self.by_id[logical_id]


def test_the_local_schedule_loop_fires_a_due_schedule(backend, store):
    heartbeat = _Heartbeat()
    loop = ScheduleLoop(_Functions(heartbeat), backend.resources, interval=3600)  # type: ignore[arg-type]
    store.put(T, "agent-1", "rate(1 minute)")
    created = store.get("agent-1")["LastModificationDate"]
    assert loop.tick(created + timedelta(seconds=30)) == []
    (event,) = loop.tick(created + timedelta(seconds=61))
    assert (event["tenant"], event["agentId"], event["attempt"]) == (T, "agent-1", "1")
    assert event["scheduledTime"] == (created + timedelta(minutes=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert heartbeat.events == [event]
