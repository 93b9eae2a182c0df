"""`api` function: the console's page and files, and CRUD routes for agents, workspaces, sessions, runs, usage, memories, facts, archive search, card types, decisions, manual runs, re-examinations, run memory and Active Memory (never imports the engine or the model SDK)."""

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.account.routes import router as account
from engram.agents.routes import router as agents
from engram.api.http import build_app, cors_of
from engram.apikeys.routes import router as api_keys
from engram.approvals.routes import router as approvals
from engram.cards.routes import router as cards
from engram.connections.routes import router as connections
from engram.console.routes import router as console
from engram.conversations.routes import router as sessions
from engram.facts.routes import router as facts
from engram.health.routes import router as health
from engram.kernel.observability import logger, metrics, tracer
from engram.kernel.settings import get_settings
from engram.mcp_server.routes import router as mcp
from engram.memory.routes import router as memory
from engram.recall.routes import router as recall
from engram.roots import api
from engram.roots.function import FunctionRoot
from engram.runs.routes import router as runs
from engram.streaming.routes import router as streaming
from engram.usage.routes import router as usage

ROOT = FunctionRoot(api.build)
app = build_app(
    agents,
    sessions,
    recall,
    memory,
    facts,
    account,
    cards,
    runs,
    approvals,
    usage,
    connections,
    api_keys,
    mcp,
    streaming,
    console,
    health,
    cors=cors_of(get_settings().cors_allow_origins),
)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    app.append_context(deps=ROOT.deps)
    return app.resolve(event, context)
