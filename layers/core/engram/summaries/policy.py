"""After a turn whose save cut messages from the transcript, a job to fold them into the session's
running summary (CM8) goes to the extraction queue: off the reply path, best-effort (a job that
is lost or fails leaves the messages to the next cut's job, which folds both)."""

from __future__ import annotations

from engram.engine.tools import ToolContext
from engram.engine.turn import TurnOutcome, TurnPolicy
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.ports import JobQueues

SUMMARY_JOB = "summary"  # the `job` field that sends a job of the extraction queue to summaries.service


class SummaryPolicy(TurnPolicy):
    def __init__(self, queues: JobQueues):
        self.queues = queues

    def after_commit(self, ctx: ToolContext, outcome: TurnOutcome) -> None:
        run = outcome.run
        if not outcome.cut or run.session_id is None:
            return
        job = {"job": SUMMARY_JOB, "runId": run.id, "tenant": ctx.tenant, "agentId": ctx.agent.id, "sessionId": run.session_id}
        try:
            self.queues.enqueue_extraction(job)
        except Exception:
            logger.exception("could not enqueue the session summary", extra={"run_id": run.id})
            metrics.add_metric(name="SummaryEnqueueFailed", unit=MetricUnit.Count, value=1)
