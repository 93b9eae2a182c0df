"""`extract` function: the extraction-queue consumer (automatic memory extraction after each run)."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.conversations.summaries.policy import SUMMARY_JOB
from engram.conversations.summaries.service import process_summary_job
from engram.engine.providers import preload
from engram.extraction.service import process_extraction_job
from engram.kernel.observability import logger, metrics, tracer
from engram.kernel.settings import get_settings
from engram.roots import extract
from engram.roots.function import FunctionRoot

ROOT = FunctionRoot(extract.build)
preload(get_settings())  # the model SDK in init, not in the first request (bench/cold_start.py)
# A failed job is reported alone and redelivered; after three receives SQS parks it in the DLQ.
processor = BatchProcessor(event_type=EventType.SQS)


def handle_extract_record(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
    logger.remove_keys(["run_id"])  # a warm container must not log the previous job's id
    job = record.json_body  # not JSON: raises, so the record fails and ends in the DLQ
    logger.append_keys(run_id=job.get("runId") if isinstance(job, dict) else None)
    remaining = lambda_context.get_remaining_time_in_millis() / 1000 if lambda_context else None
    if isinstance(job, dict) and job.get("job") == SUMMARY_JOB:  # a session's running summary (CM8)
        process_summary_job(ROOT.deps, job, remaining_s=remaining)
        return
    process_extraction_job(ROOT.deps, job, remaining_s=remaining)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return process_partial_response(event=event, record_handler=handle_extract_record, processor=processor, context=context)
