"""TL10: the owner is told when a turn waits for their approval: one SNS message per paused turn
(the stack's approvals topic, subscribable by e-mail as the alarms are). It names the tools, the
agent and the run; never a call's input (it may hold what the owner would not e-mail)."""

from __future__ import annotations

import json
from functools import cache
from typing import Protocol, cast

from engram.aws.clients import make_client
from engram.engine.plan import TurnOutcome, TurnPolicy
from engram.engine.tools import ToolContext
from engram.kernel.observability import logger


class _Publisher(Protocol):
    def publish(self, *, TopicArn: str, Subject: str, Message: str) -> object: ...


@cache
def _sns() -> _Publisher:
    return cast(_Publisher, make_client("sns"))  # boto3 with the first notice, not with the module


def notice(outcome: TurnOutcome, agent_name: str) -> dict[str, str]:
    """The message: subject and body (JSON), with no input values."""
    run = outcome.run
    waiting = [p for p in run.pending_approvals if "decision" not in p]
    tools = sorted({str(p["name"]) for p in waiting})
    body = {
        "runId": run.id,
        "agentId": run.agent_id,
        "agentName": agent_name,
        "kind": run.kind,
        "sessionId": run.session_id,
        "tools": tools,
        "expiresAt": min(str(p["expiresAt"]) for p in waiting),
        "decide": f"POST /api/runs/{run.id}/approvals, or `engram approvals`",
    }
    subject = f"Engram: {agent_name[:40]} waits for your approval ({', '.join(tools)})"[:100]
    return {"Subject": subject, "Message": json.dumps(body, ensure_ascii=False)}


class ApprovalNotice(TurnPolicy):
    """Publishes the notice when the turn pauses (best-effort: a failure is logged, the turn waits)."""

    def __init__(self, topic_arn: str):
        self.topic_arn = topic_arn

    def paused(self, ctx: ToolContext, outcome: TurnOutcome) -> None:
        if not self.topic_arn or all("decision" in p for p in outcome.run.pending_approvals):
            return
        try:
            message = notice(outcome, ctx.agent.name)
            _sns().publish(TopicArn=self.topic_arn, Subject=message["Subject"], Message=message["Message"])
        except Exception as err:
            logger.warning("could not send the approval notice", extra={"run_id": outcome.run.id, "error": repr(err)})
