"""ScheduleRepository against moto's EventBridge Scheduler, in the schedule group of template.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from engram.kernel.errors import BadRequest
from engram.kernel.settings import Settings
from engram.runs.schedules import ScheduleRepository
from local.resources import create_resources
from local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


@pytest.fixture
def store():
    with mock_aws():
        resources = create_resources(load_template(ROOT / "template.yaml"))
        settings = Settings.from_env(resources.env("ApiFunction"))
        yield ScheduleRepository(settings)


def test_put_creates_the_agents_schedule(store):
    store.put("tenant1", "agent-1", "rate(1 hour)")
    schedule = store.get("agent-1")
    settings = store.settings
    assert schedule["Name"] == "agent-1" and schedule["GroupName"] == settings.schedule_group == "engram-local-schedule-group"
    assert schedule["ScheduleExpression"] == "rate(1 hour)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["State"] == "ENABLED"
    assert "agent-1" in schedule["Description"]
    target = schedule["Target"]
    assert target["Arn"] == settings.heartbeat_function_arn
    assert target["Arn"].endswith(":function:engram-local-heartbeat-function")
    assert target["RoleArn"] == settings.scheduler_role_arn
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3}
    assert target["DeadLetterConfig"] == {"Arn": settings.scheduler_dlq_arn}
    assert settings.scheduler_dlq_arn.endswith(":engram-local-scheduler-dlq")


def test_the_input_carries_the_agent_and_schedulers_context_attributes(store):
    store.put("tenant1", "agent-1", "rate(1 hour)")
    assert json.loads(store.get("agent-1")["Target"]["Input"]) == {
        "source": "engram.schedule",
        "tenant": "tenant1",
        "agentId": "agent-1",
        "scheduledTime": "<aws.scheduler.scheduled-time>",
        "executionId": "<aws.scheduler.execution-id>",
        "attempt": "<aws.scheduler.attempt-number>",
    }


def test_the_sample_scheduler_event_has_the_inputs_shape(store):
    store.put("t", "a1", "rate(1 hour)")
    sample = json.loads((EVENTS / "heartbeat-schedule.json").read_text())
    stored = json.loads(store.get("a1")["Target"]["Input"])
    assert sample.keys() == stored.keys()
    assert {k: v for k, v in sample.items() if not str(stored[k]).startswith("<aws.")} == {
        k: v for k, v in stored.items() if not str(v).startswith("<aws.")
    }


def test_put_again_updates_the_expression(store):
    store.put("tenant1", "agent-1", "rate(1 hour)")
    store.put("tenant1", "agent-1", "cron(0 9 ? * MON-FRI *)")
    schedule = store.get("agent-1")
    assert schedule["ScheduleExpression"] == "cron(0 9 ? * MON-FRI *)"
    assert schedule["Target"]["DeadLetterConfig"] == {"Arn": store.settings.scheduler_dlq_arn}
    assert len(store.client.list_schedules(GroupName=store.settings.schedule_group)["Schedules"]) == 1


def test_delete_removes_it_and_a_missing_one_is_not_an_error(store):
    store.put("tenant1", "agent-1", "rate(1 hour)")
    assert store.delete("agent-1") is True
    assert store.get("agent-1") is None
    assert store.delete("agent-1") is False
    assert store.get("never") is None


def test_agent_ids_are_validated_before_they_reach_scheduler(store):
    for bad in ("a/b", "", "x" * 65):
        with pytest.raises(BadRequest):
            store.put("tenant1", bad, "rate(1 hour)")
        with pytest.raises(BadRequest):
            store.delete(bad)


class _Rejecting:
    """A scheduler client that fails create_schedule with a given error code."""

    def __init__(self, code: str, *, on_update: str | None = None):
        self.code, self.on_update = code, on_update
        self.calls: list[str] = []

    def _error(self, code: str, op: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": f"{code} says no"}}, op)

    def create_schedule(self, **kwargs):
        self.calls.append("create")
        raise self._error(self.code, "CreateSchedule")

    def update_schedule(self, **kwargs):
        self.calls.append("update")
        if self.on_update:
            raise self._error(self.on_update, "UpdateSchedule")
        return {}


def _settings() -> Settings:
    return Settings.from_env({"SCHEDULE_GROUP": "g", "HEARTBEAT_FUNCTION_ARN": "arn:f", "SCHEDULER_ROLE_ARN": "arn:r"})


def test_an_invalid_expression_is_a_bad_request_naming_it():
    store = ScheduleRepository(_settings(), client=_Rejecting("ValidationException"))
    with pytest.raises(BadRequest) as err:
        store.put("t", "a1", "rate(every hour)")
    assert (err.value.field, err.value.code, err.value.status) == ("schedule", "invalid_schedule", 400)
    assert "rate(every hour)" in err.value.message


def test_an_existing_schedule_is_updated_and_its_validation_errors_map_too():
    client = _Rejecting("ConflictException")
    ScheduleRepository(_settings(), client=client).put("t", "a1", "rate(1 hour)")
    assert client.calls == ["create", "update"]
    client = _Rejecting("ConflictException", on_update="ValidationException")
    with pytest.raises(BadRequest):
        ScheduleRepository(_settings(), client=client).put("t", "a1", "cron(bad)")


def test_other_errors_are_raised_as_they_are():
    with pytest.raises(ClientError) as err:
        ScheduleRepository(_settings(), client=_Rejecting("AccessDeniedException")).put("t", "a1", "rate(1 hour)")
    assert err.value.response["Error"]["Code"] == "AccessDeniedException"
