"""Scheduled heartbeats in template.yaml: the scheduler's role, the API's scheduler permissions,
the run queue and HeartbeatFunction's least-privilege IAM."""

from __future__ import annotations

import json

from local.template import load_template

TEMPLATE = load_template()
RESOURCES = TEMPLATE.resources


def _props(logical_id: str) -> dict:
    return RESOURCES[logical_id]["Properties"]


def _statements(function_id: str) -> dict[str, dict]:
    """A function's inline policy statements by Sid (conditional ones unwrapped)."""
    (policy,) = _props(function_id)["Policies"]
    out = {}
    for statement in policy["Statement"]:
        chosen = statement["Fn::If"][1] if "Fn::If" in statement else statement
        out[chosen["Sid"]] = chosen
    return out


def _actions(statement: dict) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def test_schedule_group_and_scheduler_dlq():
    assert RESOURCES["ScheduleGroup"]["Type"] == "AWS::Scheduler::ScheduleGroup"
    dlq = _props("SchedulerDLQ")
    assert RESOURCES["SchedulerDLQ"]["Type"] == "AWS::SQS::Queue"
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600 and dlq["SqsManagedSseEnabled"] is True


def test_scheduler_role_is_assumed_by_scheduler_of_this_account_only():
    role = _props("SchedulerRole")
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_scheduler_role_can_only_invoke_the_heartbeat_function_and_send_to_its_dlq():
    (policy,) = _props("SchedulerRole")["Policies"]
    statements = policy["PolicyDocument"]["Statement"]
    granted = {(a, json.dumps(s["Resource"], sort_keys=True)) for s in statements for a in _actions(s)}
    assert all(s["Effect"] == "Allow" for s in statements)
    assert granted == {
        # the alias schedules name, and the function itself for schedules saved before it existed
        (
            "lambda:InvokeFunction",
            json.dumps([{"Ref": "HeartbeatFunction.Alias"}, {"Fn::GetAtt": ["HeartbeatFunction", "Arn"]}], sort_keys=True),
        ),
        ("sqs:SendMessage", json.dumps({"Fn::GetAtt": ["SchedulerDLQ", "Arn"]})),
    }


def test_api_function_manages_schedules_in_the_group_only():
    statements = _statements("ApiFunction")
    schedules = statements["Schedules"]
    assert _actions(schedules) == {
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:DeleteSchedule",
        "scheduler:GetSchedule",
    }
    assert schedules["Resource"] == {
        "Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"
    }
    scheduler_actions = {a for s in statements.values() for a in _actions(s) if a.startswith("scheduler:")}
    assert scheduler_actions == _actions(schedules)  # no other statement grants scheduler access


def test_api_function_passes_the_scheduler_role_to_scheduler_only():
    pass_role = [s for s in _statements("ApiFunction").values() if "iam:PassRole" in _actions(s)]
    assert len(pass_role) == 1
    (statement,) = pass_role
    assert _actions(statement) == {"iam:PassRole"}
    assert statement["Resource"] == {"Fn::GetAtt": ["SchedulerRole", "Arn"]}
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_api_function_enqueues_runs_and_knows_the_scheduler_pieces():
    enqueue = [s for s in _statements("ApiFunction").values() if "sqs:SendMessage" in _actions(s)]
    # runs, and a decided paused turn's resumption (TL10): a chat turn's on the turn queue
    assert [s["Resource"] for s in enqueue] == [[{"Fn::GetAtt": ["RunQueue", "Arn"]}, {"Fn::GetAtt": ["TurnQueue", "Arn"]}]]
    env = _props("ApiFunction")["Environment"]["Variables"]
    # CONSOLE_*: the console's sign-in; AUTH_*: POST /mcp checks tokens itself (MX4).
    assert {k: v for k, v in env.items() if not k.startswith(("CONSOLE_", "AUTH_"))} == {
        "SCHEDULE_GROUP": {"Ref": "ScheduleGroup"},
        "SCHEDULER_ROLE_ARN": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
        "HEARTBEAT_FUNCTION_ARN": {"Ref": "HeartbeatFunction.Alias"},  # new schedules invoke the `live` alias
        "SCHEDULER_DLQ_ARN": {"Fn::GetAtt": ["SchedulerDLQ", "Arn"]},
        # RFC 7591 registration onto the created pool (MX4); empty with an external issuer
        "USER_POOL_ID": {"Fn::If": ["CreateUserPool", {"Ref": "UserPool"}, ""]},
    }
    # every function finds the run queue; HeartbeatFunction never sees its own ARN (no cycle)
    assert TEMPLATE.function_globals["Environment"]["Variables"]["RUN_QUEUE_URL"] == {"Ref": "RunQueue"}
    assert "HEARTBEAT_FUNCTION_ARN" not in TEMPLATE.function("HeartbeatFunction").environment


def test_run_queue_visibility_is_six_times_the_heartbeat_timeout_and_has_a_dlq():
    queue = _props("RunQueue")
    heartbeat = TEMPLATE.function("HeartbeatFunction")
    assert queue["VisibilityTimeout"] == 6 * heartbeat.timeout
    assert queue.get("FifoQueue") is None and queue["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": ["RunDLQ", "Arn"]}, "maxReceiveCount": 3}
    assert _props("RunDLQ")["MessageRetentionPeriod"] == 1209600


def test_heartbeat_function_consumes_the_run_queue_one_job_at_a_time_and_its_failed_firings():
    spec = TEMPLATE.function("HeartbeatFunction")
    assert (spec.code_uri, spec.handler, spec.timeout, spec.memory_size) == (
        "functions/heartbeat/",
        "app.lambda_handler",
        600,
        1024,
    )
    source, failed_firings = spec.sqs
    assert (source.queue_id, source.batch_size, source.report_failures) == ("RunQueue", 1, True)
    assert (failed_firings.queue_id, failed_firings.report_failures) == ("FailedFiringQueue", True)
    event = _props("HeartbeatFunction")["Events"][source.event_name]["Properties"]
    assert event["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "RunQueueMaxConcurrency"}
    assert TEMPLATE.parameters["RunQueueMaxConcurrency"]["Default"] == 5
    assert spec.routes == ()


def test_heartbeat_function_has_no_scheduler_or_pass_role_permission():
    statements = _statements("HeartbeatFunction")
    actions = {a for s in statements.values() for a in _actions(s)}
    assert not any(a.startswith(("scheduler:", "iam:")) for a in actions)
    flat = json.dumps(_props("HeartbeatFunction")["Policies"])
    assert '"Resource": "*"' not in flat
    # extraction jobs, and the sweeper's resume jobs of decided paused turns (TL10)
    assert [s["Resource"] for s in statements.values() if "sqs:SendMessage" in _actions(s)] == [
        [{"Fn::GetAtt": ["ExtractQueue", "Arn"]}, {"Fn::GetAtt": ["TurnQueue", "Arn"]}, {"Fn::GetAtt": ["RunQueue", "Arn"]}]
    ]


def test_heartbeat_function_policy_matches_the_chat_functions_for_state_and_models():
    heartbeat, chat = _statements("HeartbeatFunction"), _statements("ChatFunction")
    for sid in ("Table", "State", "ListState", "AnthropicKey", "GivenAnthropicKey", "Bedrock"):
        assert heartbeat[sid] == chat[sid], sid
    conditions = {
        s["Fn::If"][1]["Sid"]: s["Fn::If"][0] for s in _props("HeartbeatFunction")["Policies"][0]["Statement"] if "Fn::If" in s
    }
    assert conditions == {
        "AnthropicKey": "CreateAnthropicSecret",
        "GivenAnthropicKey": "UseGivenAnthropicSecret",
        "Bedrock": "UseBedrock",
        "DeleteUnusedOAuthClients": "CreateUserPool",  # the sweeper's RFC 7591 clean-up (MX4)
        "NotifyApprovals": "NotifyByEmail",  # a paused run's notice (TL10)
    }
    assert (
        heartbeat["NotifyApprovals"]
        == chat["NotifyApprovals"]
        == {
            "Sid": "NotifyApprovals",
            "Effect": "Allow",
            "Action": "sns:Publish",
            "Resource": {"Ref": "ApprovalTopic"},
        }
    )


def test_outputs_name_the_run_queue_and_the_schedule_group():
    outputs = TEMPLATE.data["Outputs"]
    assert outputs["RunQueueUrl"]["Value"] == {"Ref": "RunQueue"}
    assert outputs["ScheduleGroupName"]["Value"] == {"Ref": "ScheduleGroup"}
