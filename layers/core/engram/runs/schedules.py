"""EventBridge Scheduler: one schedule per agent (named after it) that fires the heartbeat function.

Schedules live in the stack's own group (SCHEDULE_GROUP), so the API's IAM can be scoped to it.
The target is the heartbeat function, invoked through SCHEDULER_ROLE_ARN (which may only invoke
that function and send to the scheduler DLQ). The Input carries the tenant and the agent, plus
Scheduler's context attributes, which it fills in at every firing: the scheduled time and the
execution id make the firing idempotent on the heartbeat side (delivery is at least once).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from engram.aws.clients import make_client
from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id
from engram.kernel.settings import Settings
from engram.runs import expressions

# Replaced by EventBridge Scheduler when the schedule invokes its target.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
ATTEMPT_NUMBER = "<aws.scheduler.attempt-number>"
EVENT_SOURCE = "engram.schedule"

# A firing older than an hour is dropped (the next one comes anyway); failures go to the DLQ.
RETRY_POLICY = {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3}


def schedule_input(tenant: str, agent_id: str) -> str:
    """The target's Input: what the heartbeat function receives, once Scheduler filled it in."""
    return json.dumps(
        {
            "source": EVENT_SOURCE,
            "tenant": tenant,
            "agentId": agent_id,
            "scheduledTime": SCHEDULED_TIME,
            "executionId": EXECUTION_ID,
            "attempt": ATTEMPT_NUMBER,
        },
        separators=(",", ":"),
    )


def _error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


class ScheduleRepository:
    def __init__(self, settings: Settings, client: object = None):
        self.settings = settings
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("scheduler")
        return self._client

    @property
    def group(self) -> str:
        return str(self.settings.schedule_group)

    def put(self, tenant: str, agent_id: str, expression: str) -> None:
        """Create the agent's schedule, or replace it when it exists (same definition either way).
        The expression is checked first with the parser the local loop uses, so an expression
        Scheduler would refuse is the same 400 everywhere (moto stores any expression)."""
        check_id("agentId", agent_id)
        expressions.check(expression, min_interval_s=self.settings.min_schedule_interval_s)
        definition: dict[str, Any] = {
            "Name": agent_id,
            "GroupName": self.group,
            "Description": f"Heartbeat of Engram agent {agent_id}",
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Target": {
                "Arn": self.settings.heartbeat_function_arn,
                "RoleArn": self.settings.scheduler_role_arn,
                "Input": schedule_input(tenant, agent_id),
                "RetryPolicy": dict(RETRY_POLICY),
                "DeadLetterConfig": {"Arn": self.settings.scheduler_dlq_arn},
            },
        }
        try:
            try:
                self.client.create_schedule(**definition)
            except ClientError as err:
                if _error_code(err) != "ConflictException":
                    raise
                self.client.update_schedule(**definition)
        except ClientError as err:
            if _error_code(err) == "ValidationException":
                message = err.response.get("Error", {}).get("Message", "")
                raise BadRequest(
                    f"schedule {expression!r} is not a valid EventBridge Scheduler expression"
                    + (f": {message}" if message else ""),
                    field="schedule",
                    code="invalid_schedule",
                ) from None
            raise

    def delete(self, agent_id: str) -> bool:
        """Remove the agent's schedule; False when there was none."""
        check_id("agentId", agent_id)
        try:
            self.client.delete_schedule(Name=agent_id, GroupName=self.group)
        except ClientError as err:
            if _error_code(err) == "ResourceNotFoundException":
                return False
            raise
        return True

    def get(self, agent_id: str) -> dict[str, object] | None:
        """The GetSchedule response, or None when the agent has no schedule."""
        check_id("agentId", agent_id)
        try:
            found: dict[str, Any] = self.client.get_schedule(Name=agent_id, GroupName=self.group)
            return found
        except ClientError as err:
            if _error_code(err) == "ResourceNotFoundException":
                return None
            raise
