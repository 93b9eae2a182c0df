"""`api` function: the console's page and files, and CRUD routes for agents, workspaces, sessions, runs, usage, memories, facts, archive search, card types, decisions, manual runs, re-examinations, run memory and Active Memory (never imports the engine or the model SDK).

Each router (its models, services and repositories) is imported with the first request under its
prefixes, not with the function: a cold start pays for the routes it serves (issue 33, item 7)."""

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.api.http import build_app, cors_of
from engram.api.routing import RouterSpec
from engram.kernel.observability import logger, metrics, tracer
from engram.kernel.settings import get_settings
from engram.roots import api
from engram.roots.function import FunctionRoot

# The routers and the paths they serve: no route of one may match a request another's does
# (tests/unit/test_lazy_routes.py checks these against the routers and docs/openapi.yaml).
ROUTERS = (
    RouterSpec("engram.agents.routes", ("/api/agents", "/api/workspaces"), ("GET", "POST", "PATCH", "DELETE")),
    RouterSpec("engram.conversations.routes", ("/api/agents/*/sessions",), ("GET", "POST", "DELETE")),
    RouterSpec("engram.recall.routes", ("/api/agents/*/archive",), ("GET",)),
    RouterSpec(
        "engram.memory.routes", ("/api/agents/*/memories", "/api/workspaces/*/memories"), ("GET", "POST", "PATCH", "DELETE")
    ),
    RouterSpec("engram.facts.routes", ("/api/me/facts", "GET /api/me", "PATCH /api/me"), ("GET", "POST", "PATCH", "DELETE")),
    RouterSpec("engram.account.routes", ("/api/me/export", "DELETE /api/me"), ("GET", "POST", "DELETE")),
    RouterSpec("engram.cards.routes", ("/api/card-types", "/api/agents/*/decisions"), ("GET", "PUT")),
    RouterSpec(
        "engram.runs.routes", ("/api/runs", "/api/agents/*/runs", "/api/agents/*/active-memory"), ("GET", "POST", "PATCH")
    ),
    RouterSpec("engram.approvals.routes", ("/api/runs/*/approvals",), ("POST",)),
    RouterSpec("engram.usage.routes", ("/api/usage",), ("GET",)),
    RouterSpec("engram.connections.routes", ("/api/connections",), ("GET", "POST", "PATCH", "DELETE")),
    RouterSpec("engram.apikeys.routes", ("/api/me/api-keys",), ("GET", "POST", "DELETE")),
    RouterSpec("engram.mcp_server.routes", ("/mcp", "/.well-known", "/api/oauth"), ("GET", "POST", "DELETE")),
    RouterSpec("engram.streaming.routes", ("/api/stream-tickets",), ("POST",)),
    RouterSpec("engram.console.routes", ("/", "/console"), ("GET",)),
    RouterSpec("engram.health.routes", ("/api/health",), ("GET",)),
)

ROOT = FunctionRoot(api.build)
app = build_app(*ROUTERS, cors=cors_of(get_settings().cors_allow_origins))
if ROOT.snapstart:  # a snapshot carries every route (and the hook builds their validators): restores import none
    app.include_all()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    app.append_context(deps=ROOT.deps)
    return app.resolve(event, context)
