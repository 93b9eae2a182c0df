"""One settings model, read from the environment once and passed down."""

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Every list of the API pages with `limit` (this default, at most this maximum) and `nextToken`.
# Part of the HTTP contract (docs/openapi.yaml states them), so constants, not environment.
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 100
# Run memory values are up to RUN_MEMORY_VALUE_MAX_BYTES each: a page also stops at this many
# value bytes, well under Lambda's 6 MB response limit (at least one entry is always returned).
RUN_MEMORY_PAGE_MAX_BYTES = 2_000_000


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    table_name: str = Field("engram", alias="TABLE_NAME")
    bucket_name: str = Field("engram-state", alias="BUCKET_NAME")
    turn_queue_url: str = Field("", alias="TURN_QUEUE_URL")
    extract_queue_url: str = Field("", alias="EXTRACT_QUEUE_URL")
    # Heartbeats (issue 5): API-started runs go through the run queue; schedules live in their own
    # group and fire the heartbeat function through a role that may only invoke it.
    run_queue_url: str = Field("", alias="RUN_QUEUE_URL")
    # TL10: the SNS topic told when a turn waits for its owner's approval ("": none, e.g. locally).
    approval_topic_arn: str = Field("", alias="APPROVAL_TOPIC_ARN")
    schedule_group: str = Field("engram", alias="SCHEDULE_GROUP")
    scheduler_role_arn: str = Field("", alias="SCHEDULER_ROLE_ARN")
    heartbeat_function_arn: str = Field("", alias="HEARTBEAT_FUNCTION_ARN")
    scheduler_dlq_arn: str = Field("", alias="SCHEDULER_DLQ_ARN")

    # None: deployed in Lambda without a provider (unset, or a name that is none): every model call
    # and the health check answer 503 model_not_configured naming MODEL_PROVIDER (from_env).
    # Only the local stack and the tests run offline, the default outside Lambda.
    model_provider: Literal["anthropic", "bedrock", "offline"] | None = Field("offline", alias="MODEL_PROVIDER")
    chat_model: str = Field("claude-sonnet-4-6", alias="CHAT_MODEL")
    extract_model: str = Field("claude-haiku-4-5-20251001", alias="EXTRACT_MODEL")
    bedrock_model_prefix: str = Field("us.anthropic.", alias="BEDROCK_MODEL_PREFIX")
    anthropic_secret_arn: str = Field("", alias="ANTHROPIC_SECRET_ARN")
    # Local runs may pass the key directly; deployed stacks read it from Secrets Manager.
    anthropic_api_key: str = Field("", alias="ANTHROPIC_API_KEY", repr=False)
    anthropic_base_url: str = Field("", alias="ANTHROPIC_BASE_URL")

    history_cap: int = Field(50, ge=4, le=500, alias="HISTORY_CAP")
    max_output_tokens: int = Field(4096, ge=256, le=64000, alias="MAX_OUTPUT_TOKENS")
    max_tool_rounds: int = Field(12, ge=1, le=50, alias="MAX_TOOL_ROUNDS")
    # CloudWatch usage metrics per agent (UsageCostUsd etc. with an AgentId dimension) beside the
    # per-kind ones: one custom metric per agent and kind, so off unless asked for (OB4).
    usage_metrics_per_agent: bool = Field(False, alias="USAGE_METRICS_PER_AGENT")
    # API Gateway cuts an HTTP integration at 30 s; the sync turn must answer before that.
    sync_turn_budget_s: float = Field(25.0, gt=0, le=29, alias="SYNC_TURN_BUDGET_SECONDS")
    # A turn off the request (ST1: ?async=true, a webhook, a WebSocket turn): template parameter
    # TurnBudgetSeconds, below ChatFunction's timeout (the failure grace and the commit fit after it).
    async_turn_budget_s: float = Field(300.0, gt=0, le=870, alias="TURN_BUDGET_SECONDS")
    # A heartbeat, manual, re-examination or council run (each agent of a council gets this budget).
    run_budget_s: float = Field(240.0, gt=0, le=880, alias="RUN_BUDGET_SECONDS")
    # Past its budget (a council: twice it) plus this grace, a run still queued or running is
    # marked failed (`stale`) by the sweeper; the grace covers a job's wait in its queue.
    run_stale_grace_s: int = Field(900, ge=60, le=86_400, alias="RUN_STALE_GRACE_SECONDS")
    # How long a run waits for the shared session (Active Memory) while a chat turn holds it.
    run_session_wait_s: float = Field(30.0, ge=0, le=120, alias="RUN_SESSION_WAIT_SECONDS")
    model_timeout_s: float = Field(60.0, gt=0, alias="MODEL_TIMEOUT_SECONDS")
    model_max_retries: int = Field(3, ge=0, le=10, alias="MODEL_MAX_RETRIES")
    # A turn's session lease: renewed every third of this while the turn runs, so a session whose
    # turn could not release it (an outage) is free again within this long.
    session_lease_s: float = Field(10.0, ge=3, le=60, alias="SESSION_LEASE_SECONDS")
    # How long a second sync turn on the same session waits for the first before a 409.
    session_wait_s: float = Field(8.0, ge=0, le=25, alias="SESSION_WAIT_SECONDS")

    message_max_chars: int = Field(32_000, ge=1, alias="MESSAGE_MAX_CHARS")

    # Long-term memory limits (LT2, UF1, LT4, UF2): one place, so REST, tools and injection agree.
    memory_key_max_chars: int = Field(255, ge=1, alias="MEMORY_KEY_MAX_CHARS")
    memory_value_max_chars: int = Field(2000, ge=1, alias="MEMORY_VALUE_MAX_CHARS")
    fact_min_chars: int = Field(4, ge=1, alias="FACT_MIN_CHARS")
    fact_max_chars: int = Field(500, ge=1, alias="FACT_MAX_CHARS")
    workspace_memory_rows: int = Field(30, ge=0, le=200, alias="WORKSPACE_MEMORY_ROWS")
    user_fact_rows: int = Field(10, ge=0, le=100, alias="USER_FACT_ROWS")
    agent_memory_token_budget: int = Field(1500, ge=0, le=20000, alias="AGENT_MEMORY_TOKEN_BUDGET")
    # All three memory sections together (agent, workspace, user facts), and in a session the
    # rows stored since its memory snapshot with them (conversations.snapshot).
    memory_sections_token_budget: int = Field(2000, ge=100, le=20000, alias="MEMORY_SECTIONS_TOKEN_BUDGET")
    daily_memory_ttl_days: int = Field(7, ge=1, le=365, alias="DAILY_MEMORY_TTL_DAYS")
    webhook_tolerance_s: int = Field(300, ge=1, alias="WEBHOOK_TOLERANCE_SECONDS")
    # Browser origins other than the API's own that may call it (comma-separated; "" none, "*" any).
    cors_allow_origins: str = Field("", alias="CORS_ALLOW_ORIGINS")
    # How the console signs a person in (engram.console): "dev" (the local stack's `dev-<user>`
    # tokens), "managed-login" (the created user pool's managed login, code + PKCE) or "token"
    # (an external issuer: the person pastes an access token).
    console_sign_in: Literal["dev", "managed-login", "token"] = Field("token", alias="CONSOLE_SIGN_IN")
    console_login_url: str = Field("", alias="CONSOLE_LOGIN_URL")  # https://<domain>.auth.<region>.amazoncognito.com
    console_client_id: str = Field("", alias="CONSOLE_CLIENT_ID")
    # Scopes every API call's access token must carry (space-separated; template parameter AuthScopes).
    required_scopes: str = Field("", alias="REQUIRED_SCOPES")
    # After a rotation the previous webhook secret keeps working this long (senders switch over).
    webhook_secret_grace_s: int = Field(86_400, ge=0, le=7 * 86_400, alias="WEBHOOK_SECRET_GRACE_SECONDS")
    webhook_future_skew_s: int = Field(30, ge=0, le=300, alias="WEBHOOK_FUTURE_SKEW_SECONDS")

    # Automatic extraction (EX2): one model call per finished run, bounded in time and in cost.
    extract_timeout_s: float = Field(20.0, gt=0, le=300, alias="EXTRACT_TIMEOUT_SECONDS")
    extract_budget_usd: float = Field(0.03, gt=0, le=1, alias="EXTRACT_BUDGET_USD")

    # Run memory (RM1-RM2): per-entry value size, entries per run, and memory_list's cap.
    run_memory_value_max_bytes: int = Field(65_536, ge=1_024, le=350_000, alias="RUN_MEMORY_VALUE_MAX_BYTES")
    run_memory_max_entries: int = Field(1_000, ge=10, le=10_000, alias="RUN_MEMORY_MAX_ENTRIES")
    run_memory_list_cap: int = Field(200, ge=1, le=1_000, alias="RUN_MEMORY_LIST_CAP")
    director_learnings_shown: int = Field(20, ge=0, le=100, alias="DIRECTOR_LEARNINGS_SHOWN")
    # Active Memory (AM3): the panel warns past this many runs since the last reset.
    active_memory_warn_runs: int = Field(20, ge=1, alias="ACTIVE_MEMORY_WARN_RUNS")

    # Quotas (issue 11): how much one user (tenant) may store. Reaching one is a 409 quota_exceeded;
    # deleting frees room. Counted by a counter item per tenant (or per agent/workspace), see aws.quotas.
    max_agents: int = Field(100, ge=1, le=100_000, alias="MAX_AGENTS")
    max_memories_per_scope: int = Field(1_000, ge=1, le=100_000, alias="MAX_MEMORIES_PER_SCOPE")
    max_facts: int = Field(500, ge=1, le=100_000, alias="MAX_FACTS")
    max_card_types: int = Field(50, ge=1, le=10_000, alias="MAX_CARD_TYPES")
    max_sessions_per_agent: int = Field(500, ge=2, le=100_000, alias="MAX_SESSIONS_PER_AGENT")
    max_scheduled_agents: int = Field(20, ge=1, le=10_000, alias="MAX_SCHEDULED_AGENTS")
    # All of one run's memory together (each value is also capped by RUN_MEMORY_VALUE_MAX_BYTES).
    run_memory_max_bytes: int = Field(4 * 1024 * 1024, ge=1_024, le=1_000_000_000, alias="RUN_MEMORY_MAX_BYTES")
    # The shortest interval between two heartbeats of a schedule (EventBridge Scheduler's own is 60 s).
    min_schedule_interval_s: int = Field(60, ge=60, le=86_400, alias="MIN_SCHEDULE_INTERVAL_SECONDS")
    # Account export (issue 11): a job writes JSON Lines to S3 in parts; the caller gets a
    # short-lived presigned URL. EXPORT_RETENTION_DAYS matches the ExpireExports lifecycle rule.
    export_url_ttl_s: int = Field(900, ge=60, le=3600, alias="EXPORT_URL_TTL_SECONDS")
    export_retention_days: int = Field(3, ge=1, le=7, alias="EXPORT_RETENTION_DAYS")
    export_part_bytes: int = Field(8 * 1024 * 1024, ge=5 * 1024 * 1024, le=64 * 1024 * 1024, alias="EXPORT_PART_BYTES")
    # GET /api/me/export (deprecated, one response) answers 413 past this; Lambda's limit is 6 MB.
    inline_export_max_bytes: int = Field(4_000_000, ge=1_000, le=5_500_000, alias="INLINE_EXPORT_MAX_BYTES")
    # Routine run records (heartbeats and chat turns without a card) expire after this many days; 0 keeps them.
    run_retention_days: int = Field(90, ge=0, le=3650, alias="RUN_RETENTION_DAYS")

    # MCP tool connections (TL1-TL5). The auth header's value is encrypted with this KMS key, the
    # tenant and the connection bound in as encryption context.
    connection_key_id: str = Field("", alias="CONNECTION_KEY_ID")
    max_connections: int = Field(20, ge=1, le=1_000, alias="MAX_CONNECTIONS")
    # OAuth connections (TL9): how long an authorization may take from start to callback, and the
    # API's public URL for the redirect URI and the client metadata document (empty: the URL the
    # start request came to, as API Gateway saw its host).
    oauth_state_ttl_s: int = Field(600, ge=60, le=3600, alias="OAUTH_STATE_TTL_SECONDS")
    public_api_url: str = Field("", alias="PUBLIC_API_URL")
    # Personal API keys (MX2) per user; the authorizer's JWT rules: the issuer (empty: the
    # created user pool's, AUTH_ISSUER is then its URL) and the accepted audiences (comma-separated).
    max_api_keys: int = Field(10, ge=1, le=100, alias="MAX_API_KEYS")
    auth_issuer: str = Field("", alias="AUTH_ISSUER")
    auth_audience: str = Field("", alias="AUTH_AUDIENCE")
    # Where the issuer's signing keys are when its OpenID discovery (`<issuer>/.well-known/...`)
    # cannot be reached: the local stack's emulated user pool (moto serves them on loopback).
    auth_jwks_url: str = Field("", alias="AUTH_JWKS_URL")
    # RFC 7591 registration onto the created Cognito pool (MX4; empty: no registration here). The
    # pool's managed-login domain (console_login_url) names the authorize and token endpoints.
    user_pool_id: str = Field("", alias="USER_POOL_ID")
    # Exact redirect URIs a registering client may name (comma-separated; loopback ones always may).
    mcp_redirect_allowlist: str = Field(
        "https://claude.ai/api/mcp/auth_callback,https://claude.com/api/mcp/auth_callback,"
        "https://chatgpt.com/connector_platform_oauth_redirect",
        alias="MCP_REDIRECT_ALLOWLIST",
    )
    mcp_client_scopes: str = Field("openid aws.cognito.signin.user.admin", alias="MCP_CLIENT_SCOPES")
    registered_clients_max: int = Field(500, ge=1, le=900, alias="REGISTERED_CLIENTS_MAX")
    registrations_per_source_hour: int = Field(10, ge=1, le=1000, alias="REGISTRATIONS_PER_SOURCE_HOUR")
    registration_unused_s: int = Field(86_400, ge=300, le=30 * 86_400, alias="REGISTRATION_UNUSED_SECONDS")
    # The WebSocket API (ST2): its wss:// URL (the worker posts to the same host over https), the
    # open sockets a user may hold, and how long a ticket, a connection, a subscription last.
    stream_url: str = Field("", alias="STREAM_URL")
    # Where the management API is, when not at STREAM_URL over https (the local stack's HTTP front).
    stream_endpoint: str = Field("", alias="STREAM_ENDPOINT")
    max_stream_connections: int = Field(10, ge=1, le=1_000, alias="MAX_STREAM_CONNECTIONS")
    # While a turn is quiet (a tool running), a keepalive goes to its watchers this often (ST5):
    # well inside API Gateway's 10-minute idle limit.
    stream_keepalive_s: float = Field(60.0, gt=0, le=540, alias="STREAM_KEEPALIVE_SECONDS")
    # Turns of one user queued or running at once (ST7): the next is refused, 429 too_many_turns.
    max_active_turns: int = Field(20, ge=1, le=10_000, alias="MAX_ACTIVE_TURNS")
    stream_ticket_ttl_s: int = Field(60, ge=5, le=600, alias="STREAM_TICKET_TTL_SECONDS")
    stream_connection_ttl_s: int = Field(7200, ge=60, le=7200, alias="STREAM_CONNECTION_TTL_SECONDS")
    # Egress of tool calls (TL5): "public" (AWS: https to public addresses only) or "local" (the
    # local stack: http and loopback too). ALLOW_PRIVATE_TOOL_HOSTS (template parameter
    # AllowPrivateToolHosts) admits private addresses for servers inside the VPC; link-local and
    # the instance metadata addresses stay refused.
    tool_egress: Literal["public", "local"] = Field("public", alias="TOOL_EGRESS")
    allow_private_tool_hosts: bool = Field(False, alias="ALLOW_PRIVATE_TOOL_HOSTS")
    # A discovered tool list is reused this long before a turn lists the server's tools again.
    tool_list_ttl_s: int = Field(3600, ge=0, le=7 * 86_400, alias="TOOL_LIST_TTL_SECONDS")
    # What a tool result may put in front of the model; the full result (up to the bytes cap) is
    # kept in S3 beside the transcript.
    tool_result_max_chars: int = Field(16_000, ge=1_000, le=200_000, alias="TOOL_RESULT_MAX_CHARS")
    tool_response_max_bytes: int = Field(2_000_000, ge=10_000, le=20_000_000, alias="TOOL_RESPONSE_MAX_BYTES")
    # A server's tool list: at most this many tools and this many bytes of schemas.
    tool_list_max_tools: int = Field(100, ge=1, le=1_000, alias="TOOL_LIST_MAX_TOOLS")
    tool_schema_max_bytes: int = Field(16_000, ge=1_000, le=200_000, alias="TOOL_SCHEMA_MAX_BYTES")
    # A run's timeline (OB1): at most this many bytes of spans kept with the run (the rest are
    # dropped and the trace says so). OpenTelemetry export (OB2, template parameter TracingExport):
    # "off" (nothing, no import), "otlp" (to OTEL_EXPORTER_OTLP_ENDPOINT) or "xray-adot" (to the
    # ADOT collector layer's local endpoint, which sends them to X-Ray).
    trace_max_bytes: int = Field(48_000, ge=4_000, le=300_000, alias="TRACE_MAX_BYTES")
    tracing_export: Literal["off", "otlp", "xray-adot"] = Field("off", alias="TRACING_EXPORT")
    otlp_endpoint: str = Field("", alias="OTEL_EXPORTER_OTLP_ENDPOINT")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        source = os.environ if env is None else env
        values: dict[str, str | None] = {k: v for k, v in source.items() if v != ""}
        if in_lambda(source) and values.get("MODEL_PROVIDER") not in MODEL_PROVIDERS:
            values["MODEL_PROVIDER"] = None  # never the offline model in a deployed function
        return cls.model_validate(values)


MODEL_PROVIDERS = ("anthropic", "bedrock", "offline")
PROVIDER_NOT_SET = (
    "MODEL_PROVIDER names no model provider: set it to anthropic or bedrock "
    "(the stack's ModelProvider parameter; offline is for the local stack and tests only)"
)


def in_lambda(env: Mapping[str, str]) -> bool:
    """A deployed function: Lambda names it, and it is not `sam local` (the local stack sets neither)."""
    return bool(env.get("AWS_LAMBDA_FUNCTION_NAME")) and env.get("AWS_SAM_LOCAL") != "true"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Validated once per container; tests call `get_settings.cache_clear()` after changing env."""
    return Settings.from_env()
