"""Running the stack (issue 13, items 5-7) in template.yaml: every function's logs expire, alarms
watch the dead letters and the functions (emailed only with AlarmEmail), and a heartbeat firing
that failed after its retries reaches the heartbeat function through an on-failure queue."""

from __future__ import annotations

import json
import re

import pytest

from local.resources import Physical, Resolver
from local.template import load_template

TEMPLATE = load_template()
RESOURCES = TEMPLATE.resources
FUNCTIONS = [lid for lid, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"]
RUNTIME_FUNCTIONS = ["ApiFunction", "ChatFunction", "ExtractFunction", "HeartbeatFunction"]
DLQS = {"TurnDLQ", "ExtractDLQ", "RunDLQ", "SchedulerDLQ", "FailedFiringDLQ"}
# What CloudWatch Logs accepts as RetentionInDays (PutRetentionPolicy).
CLOUDWATCH_RETENTION_DAYS = [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653]  # fmt: skip


def _props(logical_id: str) -> dict:
    return RESOURCES[logical_id]["Properties"]


def _of_type(kind: str) -> dict[str, dict]:
    return TEMPLATE.resources_of_type(kind)


# --------------------------------------------------------------------------- logs
def test_log_retention_is_a_parameter_of_the_values_cloudwatch_accepts():
    spec = TEMPLATE.parameters["LogRetentionDays"]
    assert (spec["Type"], spec["Default"]) == ("Number", 30)
    assert spec["AllowedValues"] == CLOUDWATCH_RETENTION_DAYS


def test_every_function_writes_to_a_log_group_of_its_own_that_expires():
    assert set(FUNCTIONS) == {*RUNTIME_FUNCTIONS, "ConsoleLoginFunction", "AuthorizerFunction"}
    groups = []
    for function in FUNCTIONS:
        config = _props(function)["LoggingConfig"]
        group = config["LogGroup"]["Ref"]
        assert RESOURCES[group]["Type"] == "AWS::Logs::LogGroup", function
        # A group of a conditional function exists exactly when the function does.
        assert RESOURCES[group].get("Condition") == RESOURCES[function].get("Condition"), function
        groups.append(group)
    assert len(set(groups)) == len(FUNCTIONS)


def test_every_log_group_of_the_stack_keeps_its_logs_for_log_retention_days():
    groups = _of_type("AWS::Logs::LogGroup")
    assert "HttpApiAccessLogs" in groups and len(groups) == len(FUNCTIONS) + 1
    for name, group in groups.items():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
    # Named after the stack, so `aws logs tail /engram/<stack>/heartbeat` finds them.
    names = {g["Properties"]["LogGroupName"]["Fn::Sub"] for n, g in groups.items() if n != "HttpApiAccessLogs"}
    assert names == {
        f"/engram/${{AWS::StackName}}/{short}" for short in ("api", "chat", "extract", "heartbeat", "console-login", "authorizer")
    }


# --------------------------------------------------------------------------- alarms
def _alarms() -> dict[str, dict]:
    return {name: r["Properties"] for name, r in _of_type("AWS::CloudWatch::Alarm").items()}


def _watching(namespace: str, metric: str) -> dict[str, str]:
    """Alarm name -> the resource its dimension names, for the alarms on one metric."""
    out = {}
    for name, alarm in _alarms().items():
        if (alarm["Namespace"], alarm["MetricName"]) == (namespace, metric):
            ((dimension),) = alarm["Dimensions"]
            value = dimension["Value"]
            out[name] = value["Fn::GetAtt"][0] if "Fn::GetAtt" in value else value["Ref"]
    return out


def test_every_dead_letter_queue_has_an_alarm_on_its_first_message():
    # A dead-letter queue is every queue no function consumes.
    consumed = {source.queue_id for source in TEMPLATE.sqs_sources()}
    assert set(TEMPLATE.queues()) - consumed == DLQS
    watched = _watching("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert sorted(watched.values()) == sorted(DLQS)
    for name, queue in watched.items():
        alarm = _alarms()[name]
        assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
        assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == ("Maximum", 0, "GreaterThanThreshold")


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_has_an_alarm_on_its_errors_and_throttles(metric):
    watched = _watching("AWS/Lambda", metric)
    assert sorted(watched.values()) == sorted(RUNTIME_FUNCTIONS)
    for name, function in watched.items():
        alarm = _alarms()[name]
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
        assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == ("Sum", 0, "GreaterThanThreshold")


def test_no_alarm_is_left_out_and_quiet_periods_do_not_alarm():
    alarms = _alarms()
    assert len(alarms) == len(DLQS) + 2 * len(RUNTIME_FUNCTIONS)
    for name, alarm in alarms.items():
        assert alarm["TreatMissingData"] == "notBreaching" and alarm["EvaluationPeriods"] == 1, name
        assert alarm["AlarmDescription"], name


def _resolved(alarm: dict, email: str) -> dict:
    topic = {"AlarmTopic": Physical("AWS::SNS::Topic", "arn:aws:sns:us-east-1:123456789012:alarms")}
    resolver = Resolver(TEMPLATE, topic, region="us-east-1", parameters={"AlarmEmail": email})
    return resolver.resolve({"AlarmActions": alarm["AlarmActions"]})


def test_alarms_notify_the_email_topic_only_when_alarm_email_is_set():
    topic = RESOURCES["AlarmTopic"]
    assert topic["Type"] == "AWS::SNS::Topic" and topic["Condition"] == "NotifyByEmail"
    assert topic["Properties"]["Subscription"] == [{"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}]
    assert TEMPLATE.conditions["NotifyByEmail"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}
    assert TEMPLATE.parameters["AlarmEmail"]["Default"] == ""
    for name, alarm in _alarms().items():
        assert _resolved(alarm, "") == {}, name  # no topic: no action
        assert _resolved(alarm, "ops@example.com") == {"AlarmActions": ["arn:aws:sns:us-east-1:123456789012:alarms"]}, name
    # nothing else names the topic, so it can be absent
    mentions = [n for n, r in RESOURCES.items() if n != "AlarmTopic" and "AlarmTopic" in json.dumps(r)]
    assert sorted(mentions) == sorted(_alarms())


@pytest.mark.parametrize(
    ("email", "ok"),
    [("", True), ("ops@example.com", True), ("a.b+alerts@sub.example.org", True), ("ops", False), ("a b@x.io", False)],
)
def test_alarm_email_must_be_an_address_or_empty(email, ok):
    assert bool(re.fullmatch(TEMPLATE.parameters["AlarmEmail"]["AllowedPattern"], email)) is ok


# --------------------------------------------------------------------------- failed firings
def test_a_firing_that_fails_after_two_retries_goes_to_the_failed_firing_queue():
    config = _props("HeartbeatFunction")["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 2
    # Type SQS with the queue's ARN is what makes SAM grant sqs:SendMessage on that queue alone.
    assert config["DestinationConfig"] == {
        "OnFailure": {"Type": "SQS", "Destination": {"Fn::GetAtt": ["FailedFiringQueue", "Arn"]}}
    }


def test_the_failed_firing_queue_is_encrypted_keeps_two_weeks_and_has_a_dlq():
    queue = _props("FailedFiringQueue")
    assert queue["SqsManagedSseEnabled"] is True and queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue.get("FifoQueue") is None  # Lambda destinations cannot be FIFO queues
    # Lambda refuses an event source whose visibility timeout is shorter than the function's timeout.
    assert queue["VisibilityTimeout"] == 6 * TEMPLATE.function("HeartbeatFunction").timeout
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": ["FailedFiringDLQ", "Arn"]}, "maxReceiveCount": 3}
    dlq = _props("FailedFiringDLQ")
    assert dlq["SqsManagedSseEnabled"] is True and dlq["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_only_the_heartbeat_function_consumes_failed_firings_reporting_each_record():
    consumers = [s for s in TEMPLATE.sqs_sources() if s.queue_id == "FailedFiringQueue"]
    assert [(s.function_id, s.report_failures) for s in consumers] == [("HeartbeatFunction", True)]


def test_no_inline_policy_grants_anything_on_the_failed_firing_queues():
    # Sending is SAM's destination policy, receiving and deleting the event source's: nothing more.
    for function in FUNCTIONS:
        policies = json.dumps(_props(function).get("Policies", []))
        assert "FailedFiring" not in policies, function
    mentions = {n for n, r in RESOURCES.items() if "FailedFiringQueue" in json.dumps(r)}
    assert mentions == {"HeartbeatFunction"}
