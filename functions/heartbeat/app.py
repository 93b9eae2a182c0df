"""`heartbeat` function: EventBridge Scheduler's target (an agent's heartbeat), the run-queue consumer
(manual, re-examination and council runs, account exports), the failed-firing queue's consumer and
the stale-run sweeper (an EventBridge rule every 5 minutes)."""

from functools import partial

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.account.service import process_export_job
from engram.apikeys.oauth_clients import sweep_registrations
from engram.approvals.models import ResumeJob, is_resume_job
from engram.approvals.resume import process_resume_job
from engram.approvals.service import sweep_approvals
from engram.engine.providers import preload
from engram.kernel.observability import logger, metrics, tracer
from engram.kernel.settings import get_settings
from engram.roots import heartbeat
from engram.roots.function import FunctionRoot
from engram.runs.council_wait import sweep_council
from engram.runs.execution import (
    is_failed_invocation,
    is_sweep,
    process_failed_firing,
    process_run_job,
    process_schedule_event,
    sweep_stale_runs,
)
from engram.runs.models import RunJob

ROOT = FunctionRoot(heartbeat.build)
preload(get_settings())  # the model SDK in init, not in the first request (bench/cold_start.py)
# A failed job is reported alone and redelivered; after three receives SQS parks it in its DLQ.
processor = BatchProcessor(event_type=EventType.SQS)


def handle_run_record(record: SQSRecord) -> None:
    logger.remove_keys(["run_id"])  # a warm container must not log the previous job's id
    job = record.json_body  # not JSON: raises, so the record fails and ends in the DLQ
    if is_failed_invocation(job):  # from FailedFiringQueue: a firing that failed after its retries
        process_failed_firing(ROOT.deps, job)
        return
    if isinstance(job, dict) and job.get("kind") == "export":  # an account export shares the run queue
        process_export_job(ROOT.deps, job)
        return
    if is_resume_job(job):  # a run whose approvals are decided (TL10)
        resume = ResumeJob.model_validate(job)
        logger.append_keys(run_id=resume.run_id)
        process_resume_job(ROOT.deps, resume)
        return
    run_job = RunJob.model_validate(job)  # not a run job: raises, the record fails (then the DLQ)
    logger.append_keys(run_id=run_job.run_id)
    process_run_job(ROOT.deps, run_job)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    if "Records" in event:
        return process_partial_response(event=event, record_handler=handle_run_record, processor=processor, context=context)
    logger.remove_keys(["run_id"])
    if is_sweep(event):  # the SweepStaleRuns rule, every 5 minutes
        deps = ROOT.deps
        swept = sweep_stale_runs(deps)
        # Expired approval requests and lost resume jobs (TL10), named when there were any.
        approvals = sweep_approvals(deps.runs, deps.approvals, deps.queues, council=partial(sweep_council, deps))
        swept.update({name: count for name, count in approvals.items() if count})
        if deps.oauth_clients is not None:  # and the OAuth clients registered but never used (MX4)
            swept["oauthClientsDeleted"] = sweep_registrations(deps.oauth_clients, deps.settings.user_pool_id)
        return swept
    # Anything else is a schedule firing (Scheduler invokes asynchronously; the result is for logs and tests).
    return process_schedule_event(ROOT.deps, event)
