"""`api` function: CRUD routes for agents, workspaces, sessions, runs, usage, memories, facts, card types, decisions, manual runs, re-examinations, run memory and Active Memory (never imports the model SDK)."""

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.api.http import build_app
from engram.api.routes_agents import router as agents
from engram.api.routes_cards import router as cards
from engram.api.routes_memory import router as memory
from engram.api.routes_runs import router as runs
from engram.api.routes_sessions import router as sessions
from engram.observability import logger, metrics, tracer

app = build_app(agents, sessions, memory, cards, runs)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
