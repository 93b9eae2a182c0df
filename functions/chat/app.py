"""`chat` function: sync turns and signed webhooks over HTTP, the FIFO turn-queue consumer, and the
WebSocket API's routes (ST2)."""

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.api.http import build_app, cors_of
from engram.approvals.models import ResumeJob, is_resume_job
from engram.approvals.resume import process_resume_job
from engram.connections.oauth_routes import router as connection_oauth
from engram.connections.probe_routes import router as connection_probes
from engram.conversations.chat import process_turn_job
from engram.conversations.chat_routes import router as chat
from engram.conversations.models import TurnJob
from engram.engine.providers import preload
from engram.kernel.observability import logger, metrics, tracer
from engram.kernel.settings import get_settings
from engram.roots import chat as chat_root
from engram.roots.function import FunctionRoot
from engram.streaming import gateway

ROOT = FunctionRoot(chat_root.build)
preload(get_settings())  # the model SDK in init, not in the first request (bench/cold_start.py)
app = build_app(chat, connection_probes, connection_oauth, cors=cors_of(get_settings().cors_allow_origins))
# A failed turn holds back the rest of its session's group; other sessions carry on.
processor = SqsFifoPartialProcessor(skip_group_on_error=True)


def handle_turn_record(record: SQSRecord) -> None:
    if is_resume_job(record.json_body):  # a chat turn whose approvals are decided (TL10)
        resume = ResumeJob.model_validate(record.json_body)
        logger.append_keys(run_id=resume.run_id)
        process_resume_job(ROOT.deps, resume)
        return
    job = TurnJob.model_validate(record.json_body)  # not a turn job: raises, the record fails (then the DLQ)
    logger.append_keys(run_id=job.run_id)
    process_turn_job(ROOT.deps, job)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    if "Records" in event:
        return process_partial_response(event=event, record_handler=handle_turn_record, processor=processor, context=context)
    if gateway.is_socket_event(event):  # the WebSocket API (ST2): $connect, $disconnect, $default
        return gateway.handle(ROOT.deps, event)
    app.append_context(deps=ROOT.deps)
    return app.resolve(event, context)
