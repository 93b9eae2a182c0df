"""After a turn whose save cut messages from the transcript, a job to fold them into the session's
running summary (CM8) goes to the extraction queue: off the reply path, best-effort (a job that
is lost or fails leaves the messages to the next cut's job, which folds both). Sent by the
session's conversation once the turn is committed (conversations.context)."""

from __future__ import annotations

from engram.engine.tools import ToolContext
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.ports import JobQueues

SUMMARY_JOB = "summary"  # the `job` field that sends a job of the extraction queue to summaries.service


def enqueue_summary(queues: JobQueues, ctx: ToolContext, run_id: str) -> None:
    """The summary job of a session turn that cut messages; never fails the turn."""
    job = {"job": SUMMARY_JOB, "runId": run_id, "tenant": ctx.tenant, "agentId": ctx.agent.id, "sessionId": ctx.session_id}
    try:
        queues.enqueue_extraction(job)
    except Exception:
        logger.exception("could not enqueue the session summary", extra={"run_id": run_id})
        metrics.add_metric(name="SummaryEnqueueFailed", unit=MetricUnit.Count, value=1)
