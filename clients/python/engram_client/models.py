"""The API's request and response shapes, generated from docs/openapi.yaml by
clients/python/gen_models.py: do not edit by hand (tests/unit/test_client_drift.py fails when this
file and the document disagree). Plain TypedDicts: a response is the decoded JSON itself.
No `from __future__ import annotations` here: TypedDict needs real annotations to tell required
keys from NotRequired ones, so a class is written after the classes it names."""

from typing import Any, Literal, NotRequired, TypedDict


class ProtectedResourceMetadata(TypedDict):
    """The `ProtectedResourceMetadata` schema."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str]
    bearer_methods_supported: list[Literal["header"]]
    resource_name: NotRequired[str]


class Success(TypedDict):
    """The `Success` schema."""

    success: Literal[True]
    data: Any


class Error(TypedDict):
    """The `Error` schema."""

    code: str
    message: str
    field: NotRequired[str]
    details: NotRequired[list[dict[str, Any]]]
    runId: NotRequired[str]
    limit: NotRequired[dict[str, Any]]


class ErrorEnvelope(TypedDict):
    """The `ErrorEnvelope` schema."""

    success: Literal[False]
    error: Error


class ToolGrant(TypedDict):
    """The `ToolGrant` schema."""

    connectionId: str
    allow: NotRequired[list[str] | None]
    requireApproval: NotRequired[bool | None | list[str]]


class Limits(TypedDict):
    """Spending limits (TL10). Cost limits count every usage of the UTC day or month (chat, runs, extraction, summaries); a turn that would pass one stops with 402 `limit_exceeded`. Absent: no limit."""

    dailyCostUsd: NotRequired[float | None]
    monthlyCostUsd: NotRequired[float | None]
    toolCallsPerTurn: NotRequired[int | None]


class AgentCreate(TypedDict):
    """The `AgentCreate` schema."""

    name: str
    persona: NotRequired[str]
    model: NotRequired[str | None]
    workspaceId: NotRequired[str | None]
    agentMemory: NotRequired[bool]
    activeMemory: NotRequired[bool]
    reviewDecisions: NotRequired[bool]
    traceContent: NotRequired[bool]
    defaultPrompt: NotRequired[str]
    schedule: NotRequired[str | None]
    cardType: NotRequired[str | None]
    team: NotRequired[list[str]]
    tools: NotRequired[list[ToolGrant]]
    serverTools: NotRequired[list[Literal["web_search", "web_fetch"]]]
    requireApproval: NotRequired[list[str]]
    approvalTimeoutS: NotRequired[int]
    limits: NotRequired[Limits | None]


class CardField(TypedDict):
    """The `CardField` schema."""

    type: Literal["string", "number", "integer", "boolean", "enum"]
    required: NotRequired[bool]
    enum: NotRequired[list[str] | None]
    min: NotRequired[float | None]
    max: NotRequired[float | None]
    maxLength: NotRequired[int | None]
    description: NotRequired[str]


class CardTypeBody(TypedDict):
    """The `CardTypeBody` schema."""

    description: NotRequired[str]
    fields: dict[str, Any]
    reExaminable: NotRequired[Literal[False, True, "until_resolved"]]
    reExamineActions: NotRequired[list[str]]
    summaryFields: NotRequired[list[str]]


class AgentUpdate(TypedDict):
    """Only `model` (null = back to the default), `workspaceId`, `schedule`, `cardType` and `limits` may be null."""

    name: NotRequired[str]
    persona: NotRequired[str]
    model: NotRequired[str | None]
    workspaceId: NotRequired[str | None]
    agentMemory: NotRequired[bool]
    activeMemory: NotRequired[bool]
    reviewDecisions: NotRequired[bool]
    traceContent: NotRequired[bool]
    defaultPrompt: NotRequired[str]
    schedule: NotRequired[str | None]
    cardType: NotRequired[str | None]
    team: NotRequired[list[str]]
    tools: NotRequired[list[ToolGrant]]
    serverTools: NotRequired[list[Literal["web_search", "web_fetch"]]]
    requireApproval: NotRequired[list[str]]
    approvalTimeoutS: NotRequired[int]
    limits: NotRequired[Limits | None]


class WorkspaceCreate(TypedDict):
    """The `WorkspaceCreate` schema."""

    name: str
    description: NotRequired[str]


class WorkspaceUpdate(TypedDict):
    """The `WorkspaceUpdate` schema."""

    name: NotRequired[str]
    description: NotRequired[str]


class SessionCreate(TypedDict):
    """The `SessionCreate` schema."""

    id: NotRequired[str | None]
    title: NotRequired[str]


class Me(TypedDict):
    """The `Me` schema."""

    name: str | None
    limits: Limits


class UserLimits(TypedDict):
    """The caller's limits over all their agents; `{}` or null removes them."""

    dailyCostUsd: NotRequired[float | None]
    monthlyCostUsd: NotRequired[float | None]


class MeUpdate(TypedDict):
    """The `MeUpdate` schema."""

    name: NotRequired[str | None]
    limits: NotRequired[UserLimits | None]


class MessageIn(TypedDict):
    """The `MessageIn` schema."""

    message: str
    clientTurnId: NotRequired[str]


class WebhookIn(TypedDict):
    """Note the snake_case `session_id` (this body alone is not camelCase)."""

    message: str
    session_id: NotRequired[str]


class MemoryCreate(TypedDict):
    """Upsert by `key`. Updating an existing row replaces its value and the fields the body names"""

    key: str
    value: str
    source: NotRequired[Literal["manual"]]
    pinned: NotRequired[bool]
    importance: NotRequired[int]
    category: NotRequired[Literal["core", "daily"]]
    confidence: NotRequired[Literal["asserted", "inferred"]]
    topic: NotRequired[str | None]


class MemoryUpdate(TypedDict):
    """Only `manual` rows take changes other than `pinned` (else 409 `memory_read_only`)."""

    value: NotRequired[str]
    pinned: NotRequired[bool]
    importance: NotRequired[int]
    category: NotRequired[Literal["core", "daily"]]
    confidence: NotRequired[Literal["asserted", "inferred"]]
    topic: NotRequired[str | None]


class PinBody(TypedDict):
    """The `PinBody` schema."""

    pinned: bool


class FactCreate(TypedDict):
    """The `FactCreate` schema."""

    fact: str
    topic: NotRequired[str | None]
    confidence: NotRequired[Literal["asserted", "inferred"]]


class FactUpdate(TypedDict):
    """Only `topic` may be null (clears it)."""

    fact: NotRequired[str]
    topic: NotRequired[str | None]
    confidence: NotRequired[Literal["asserted", "inferred"]]
    archived: NotRequired[bool]
    archivedReason: NotRequired[Literal["user_deleted", "user_corrected"]]


class RunCreate(TypedDict):
    """The body may be `{}` (run the agent's `defaultPrompt` without inputs)."""

    prompt: NotRequired[str | None]
    inputs: NotRequired[dict[str, Any]]


class ApprovalIn(TypedDict):
    """The `ApprovalIn` schema."""

    toolUseId: str
    decision: Literal["approve", "deny"]
    note: NotRequired[str | None]


class RunUpdate(TypedDict):
    """The `RunUpdate` schema."""

    resolutionStatus: Literal["open", "resolved", "expired"]


class TraceSpan(TypedDict):
    """The `TraceSpan` schema."""

    id: str
    parentId: str | None
    depth: int
    name: str
    kind: Literal[
        "agent", "chat", "tool", "memory.read", "memory.write", "lease", "transcript.get", "transcript.put", "commit", "job"
    ]
    startMs: float
    endMs: float
    durationMs: float
    status: Literal["ok", "error"]
    open: NotRequired[bool]
    job: NotRequired[str]
    attributes: dict[str, Any]


class RunTracePart(TypedDict):
    """The `RunTracePart` schema."""

    runId: str
    traceId: str
    source: str
    startedAt: str
    durationMs: float
    contentCaptured: bool
    truncated: bool
    droppedSpans: int
    spans: list[TraceSpan]


class RunTrace(TypedDict):
    """The `RunTrace` schema."""

    runId: str
    traceId: str
    startedAt: str
    durationMs: float
    contentCaptured: bool
    truncated: bool
    droppedSpans: int
    parts: list[str]
    spans: list[TraceSpan]
    agentId: str
    sessionId: str | None
    kind: str
    status: str


class Agent(TypedDict):
    """The `Agent` schema."""

    id: str
    createdAt: str
    updatedAt: str
    name: str
    persona: str
    model: str
    workspaceId: str | None
    agentMemory: bool
    activeMemory: bool
    reviewDecisions: bool
    defaultPrompt: str
    schedule: str | None
    cardType: str | None
    team: list[str]
    tools: list[ToolGrant]
    serverTools: list[str]
    requireApproval: list[str]
    approvalTimeoutS: int
    traceContent: bool
    limits: Limits | None


class AuthHeader(TypedDict):
    """The `AuthHeader` schema."""

    name: NotRequired[str]
    value: str


class OAuthOptions(TypedDict):
    """OAuth 2.1 instead of authHeader (not both); {} discovers everything from the server (TL9)."""

    clientId: NotRequired[str]
    clientSecret: NotRequired[str]
    scope: NotRequired[str]


class ConnectionCreate(TypedDict):
    """The `ConnectionCreate` schema."""

    name: str
    url: str
    description: NotRequired[str]
    authHeader: NotRequired[AuthHeader]
    oauth: NotRequired[OAuthOptions]
    timeoutSeconds: NotRequired[int]


class OAuthStatus(TypedDict):
    """The `OAuthStatus` schema."""

    status: Literal["needs_authorization", "authorized"]
    issuer: NotRequired[str | None]
    scope: NotRequired[str | None]
    registration: NotRequired[Literal["preregistered", "metadata_document", "dynamic"] | None]
    clientId: NotRequired[str | None]
    authorizedAt: NotRequired[str | None]
    reason: NotRequired[str | None]


class AuthorizationStart(TypedDict):
    """The `AuthorizationStart` schema."""

    authorizationUrl: str
    expiresAt: str


class PendingAuthorization(TypedDict):
    """The `PendingAuthorization` schema."""

    status: Literal["needs_authorization"]
    reason: str
    start: str
    authorizationUrl: NotRequired[str]
    expiresAt: NotRequired[str]
    error: NotRequired[dict[str, Any]]


class ConnectionUpdate(TypedDict):
    """The `ConnectionUpdate` schema."""

    name: NotRequired[str | None]
    url: NotRequired[str | None]
    description: NotRequired[str | None]
    authHeader: NotRequired[AuthHeader | None]
    timeoutSeconds: NotRequired[int | None]


class ApiKeyCreate(TypedDict):
    """The `ApiKeyCreate` schema."""

    name: str
    scopes: NotRequired[list[Literal["read", "write"]]]
    expiresAt: NotRequired[str | None]


class ApiKey(TypedDict):
    """The `ApiKey` schema."""

    id: str
    createdAt: str
    updatedAt: str
    name: str
    scopes: list[Literal["read", "write"]]
    hint: str
    expiresAt: str | None
    lastUsedAt: str | None


class ApiKeyCreated(ApiKey):
    """The `ApiKeyCreated` schema."""

    key: str


class StreamTicket(TypedDict):
    """The `StreamTicket` schema."""

    ticket: str
    expiresAt: int
    url: str


class ConnectionHealth(TypedDict):
    """What turns last met on the server (TL8), shared by every turn. A listing or call failing as unreachable, timeout, server_error or malformed_response counts as a failure (a tool's own isError does not); any success resets the count. Two failures in a row make the server `down`: no turn contacts it before `retryAfter` (30 s, doubling with each further failure up to 10 minutes), its tools are offered to the model as unavailable with the reason, and a call answers `unavailable` at once. After `retryAfter` the next turn lists its tools again (a probe it waits for about a second); the test action probes it too. A new URL or auth header resets it to `unknown`."""

    state: Literal["unknown", "healthy", "degraded", "down"]
    consecutiveFailures: int
    lastSuccessAt: str | None
    lastErrorAt: str | None
    lastError: dict[str, Any] | None
    retryAfter: str | None


class Connection(TypedDict):
    """The `Connection` schema."""

    id: str
    createdAt: str
    updatedAt: str
    name: str
    url: str
    description: str
    authHeaderName: str | None
    hasAuth: bool
    timeoutSeconds: int
    health: ConnectionHealth
    oauth: OAuthStatus | None


class DiscoveredTools(TypedDict):
    """The `DiscoveredTools` schema."""

    listedAt: str
    tools: list[dict[str, Any]]


class ConnectionWithTools(Connection):
    """The `ConnectionWithTools` schema."""

    tools: DiscoveredTools | None
    authorization: NotRequired[PendingAuthorization | None]


class ConnectionTest(TypedDict):
    """The `ConnectionTest` schema."""

    ok: bool
    listedAt: NotRequired[str]
    tools: NotRequired[list[dict[str, Any]]]
    durationMs: NotRequired[float]
    error: NotRequired[dict[str, Any]]
    authorization: NotRequired[PendingAuthorization | None]


class ApiKeyPage(TypedDict):
    """The `ApiKeyPage` schema."""

    items: list[ApiKey]
    nextToken: str | None


class ConnectionPage(TypedDict):
    """The `ConnectionPage` schema."""

    items: list[Connection]
    nextToken: str | None


class AgentCreated(Agent):
    """The `AgentCreated` schema."""

    webhookSecret: str


class WebhookSecretRotated(TypedDict):
    """The `WebhookSecretRotated` schema."""

    agentId: str
    webhookSecret: str
    previousSecretValidUntil: str | None


class AgentDeleted(TypedDict):
    """The `AgentDeleted` schema."""

    id: str
    deleted: Literal[True]
    sessionsDeleted: int
    transcriptsDeleted: int


class Deleted(TypedDict):
    """The `Deleted` schema."""

    id: str
    deleted: Literal[True]


class Workspace(TypedDict):
    """The `Workspace` schema."""

    id: str
    createdAt: str
    updatedAt: str
    name: str
    description: str


class Session(TypedDict):
    """The `Session` schema."""

    id: str
    createdAt: str
    updatedAt: str
    agentId: str
    title: str
    messageCount: int
    revision: int
    trimmedCount: int


class SessionSummary(TypedDict):
    """The `SessionSummary` schema."""

    text: str
    coveredCount: int
    updatedAt: str
    model: str


class TextBlock(TypedDict):
    """The `TextBlock` schema."""

    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    """The `ToolUseBlock` schema."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(TypedDict):
    """The `ToolResultBlock` schema."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: NotRequired[bool]


class Message(TypedDict):
    """The `Message` schema."""

    role: Literal["user", "assistant"]
    content: list[TextBlock | ToolUseBlock | ToolResultBlock]
    meta: NotRequired[dict[str, Any]]


class SessionWithMessages(Session):
    """The `SessionWithMessages` schema."""

    summary: SessionSummary | None
    messages: list[Message]


class SessionDetail(SessionWithMessages):
    """One session as `GET /api/agents/{agentId}/sessions/{sessionId}` answers it."""

    contextFrom: int
    lastResetAt: str | None
    lastRunId: str | None


class ArchivedMessage(TypedDict):
    """One message (or part of a long one) of the conversation archive: the user's words and the"""

    sessionId: str
    runId: str
    seq: int
    part: NotRequired[int]
    role: Literal["user", "assistant"]
    speaker: NotRequired[str]
    text: str
    tools: NotRequired[list[str]]
    createdAt: str
    archivedAt: NotRequired[str]
    score: NotRequired[float]


class Health(TypedDict):
    """The `Health` schema."""

    status: Literal["ok", "needs_setup"]
    model: dict[str, Any]


class Usage(TypedDict):
    """The `Usage` schema."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    costUsd: float
    cacheSavingsUsd: float


class ToolCall(TypedDict):
    """The `ToolCall` schema."""

    name: str
    input: dict[str, Any]
    result: Any
    isError: NotRequired[bool]
    connection: NotRequired[str]
    tool: NotRequired[str]
    durationMs: NotRequired[float]
    bytes: NotRequired[int]
    error: NotRequired[str]
    truncated: NotRequired[int]
    fullResultKept: NotRequired[bool]
    decision: NotRequired[Literal["approve", "deny"]]
    decidedBy: NotRequired[str]
    decidedAt: NotRequired[str]
    note: NotRequired[str]
    inputSha256: NotRequired[str]
    resultSha256: NotRequired[str]


class TurnResult(TypedDict):
    """The `TurnResult` schema."""

    runId: str
    sessionId: str
    reply: str
    toolCalls: list[ToolCall]
    usage: Usage


class PendingApproval(TypedDict):
    """The `PendingApproval` schema."""

    toolUseId: str
    name: str
    input: dict[str, Any]
    requestedAt: str
    expiresAt: str
    decision: NotRequired[Literal["approve", "deny"]]
    decidedBy: NotRequired[str]
    decidedAt: NotRequired[str]
    note: NotRequired[str]


class TurnPaused(TypedDict):
    """A turn that paused for its owner's approval of a tool call (TL10): decide with `POST /api/runs/{runId}/approvals`; the answer comes when it resumes (poll the run or watch the session's stream)."""

    runId: str
    sessionId: str | None
    status: Literal["awaiting_approval"]
    pendingApprovals: list[PendingApproval]
    toolCalls: list[ToolCall]
    usage: Usage


class RunAccepted(TypedDict):
    """The `RunAccepted` schema."""

    runId: str
    sessionId: str
    status: Literal["queued"]


class RunStarted(TypedDict):
    """A run queued for the `heartbeat` function; poll `GET /api/runs/{runId}`."""

    runId: str
    agentId: str
    kind: Literal["manual", "reexamination"]
    status: Literal["queued"]
    parentRunId: str | None


class ActiveMemory(TypedDict):
    """The Active Memory panel of an agent (its shared `dashboard` session)."""

    agentId: str
    enabled: bool
    status: Literal["fresh", "carrying_context"]
    runsSinceReset: int
    sessionAgeSeconds: int | None
    contextStartedAt: str | None
    lastActiveAt: str | None
    lastActiveSeconds: int | None
    lastResetAt: str | None
    sessionRevision: int
    warning: str | None


class RunMemoryEntry(TypedDict):
    """The `RunMemoryEntry` schema."""

    key: str
    kind: Literal["input", "step_result", "task_result", "shared"]
    value: Any
    source: str | None
    title: str | None
    description: str | None
    createdAt: str
    updatedAt: str
    valueBytes: int


class RunMemory(TypedDict):
    """The `RunMemory` schema."""

    runId: str
    items: list[RunMemoryEntry]
    nextToken: str | None


class CardType(TypedDict):
    """The `CardType` schema."""

    id: str
    createdAt: str
    updatedAt: str
    name: str
    description: str
    fields: dict[str, Any]
    reExaminable: Literal[False, True, "until_resolved"]
    reExamineActions: list[str]
    summaryFields: list[str]
    builtIn: bool


class Decision(TypedDict):
    """The `Decision` schema."""

    runId: str
    createdAt: str
    cardType: str | None
    action: str
    summary: str
    entry: str
    card: dict[str, Any]


class Run(TypedDict):
    """The `Run` schema."""

    id: str
    createdAt: str
    updatedAt: str
    startedAt: str | None
    finishedAt: str | None
    agentId: str
    kind: Literal["chat", "heartbeat", "manual", "reexamination", "council_member"]
    trigger: Literal["api", "async", "webhook", "schedule", "reexamine", "council"]
    status: Literal["queued", "running", "succeeded", "failed", "awaiting_approval"]
    prompt: str
    sessionId: str | None
    sessionRevisionBefore: int | None
    sessionRevisionAfter: int | None
    parentRunId: str | None
    councilRunId: str | None
    result: Any
    usage: Usage
    error: dict[str, Any] | None
    resolutionStatus: Literal["open", "resolved", "expired"] | None
    latestConviction: int | None
    model: str | None
    pendingApprovals: list[PendingApproval]
    waitingFor: list[str]
    toolCalls: list[ToolCall]


class UsageRow(TypedDict):
    """The `UsageRow` schema."""

    id: str
    createdAt: str
    agentId: str
    sessionKey: str
    runId: str
    model: str
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    costUsd: float
    cacheSavingsUsd: float


class Memory(TypedDict):
    """The `Memory` schema."""

    id: str
    createdAt: str
    updatedAt: str
    key: str
    value: str
    scope: Literal["agent", "workspace"]
    source: Literal["manual", "auto", "director", "chat", "profile"]
    category: Literal["core", "daily", "conversation"]
    pinned: bool
    importance: int
    confidence: Literal["asserted", "inferred"]
    topic: str | None
    lastReferencedAt: str | None
    archivedAt: str | None
    archivedReason: str | None
    sessionId: str | None
    expiresAt: int | None
    origin: dict[str, Any] | None
    supersededBy: str | None


class Fact(TypedDict):
    """The `Fact` schema."""

    id: str
    createdAt: str
    updatedAt: str
    fact: str
    source: Literal["chat", "profile", "inferred"]
    confidence: Literal["asserted", "inferred"]
    topic: str | None
    lastReferencedAt: str | None
    archivedAt: str | None
    archivedReason: str | None
    origin: dict[str, Any] | None


class Export(TypedDict):
    """The `Export` schema."""

    exportedAt: str
    profile: dict[str, Any]
    agents: list[Agent]
    workspaces: list[Workspace]
    facts: list[Fact]
    runs: list[Run]
    usage: list[UsageRow]
    usageTotals: list[dict[str, Any]]
    cardTypes: list[CardType]
    connections: list[Connection]
    apiKeys: list[ApiKey]


class AccountDeleted(TypedDict):
    """The `AccountDeleted` schema."""

    deleted: dict[str, Any]


class ExportJob(TypedDict):
    """The `ExportJob` schema."""

    id: str
    createdAt: str
    updatedAt: str
    status: Literal["queued", "running", "succeeded", "failed"]
    counts: dict[str, Any]
    bytes: int
    parts: int
    finishedAt: str | None
    error: dict[str, Any] | None


class ExportStarted(ExportJob):
    """The `ExportStarted` schema."""

    exportId: str


class ExportStatus(ExportJob):
    """The `ExportStatus` schema."""

    availableUntil: str
    downloadUrl: NotRequired[str]
    downloadUrlExpiresAt: NotRequired[str]


class AgentPage(TypedDict):
    """The `AgentPage` schema."""

    items: list[Agent]
    nextToken: str | None


class WorkspacePage(TypedDict):
    """The `WorkspacePage` schema."""

    items: list[Workspace]
    nextToken: str | None


class SessionPage(TypedDict):
    """The `SessionPage` schema."""

    items: list[Session]
    nextToken: str | None


class CardTypePage(TypedDict):
    """The `CardTypePage` schema."""

    items: list[CardType]
    nextToken: str | None


class DecisionPage(TypedDict):
    """The `DecisionPage` schema."""

    items: list[Decision]
    nextToken: str | None


class RunPage(TypedDict):
    """The `RunPage` schema."""

    items: list[Run]
    nextToken: str | None


class UsageFigures(TypedDict):
    """The `UsageFigures` schema."""

    costUsd: float
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    cacheSavingsUsd: float
    toolCalls: NotRequired[int]


class UsageBreakdown(TypedDict):
    """From the usage totals, kept per UTC day and month for the caller and each agent and added to in the same writes as the usage rows (one Query, never a scan of rows). Lists are most expensive first."""

    firstDay: str
    lastDay: str
    agentId: str | None
    totals: UsageFigures
    days: list[UsageFigures]
    models: list[UsageFigures]
    kinds: list[UsageFigures]
    agents: NotRequired[list[UsageFigures]]
    spending: dict[str, Any]


class UsagePage(TypedDict):
    """The `UsagePage` schema."""

    items: list[UsageRow]
    nextToken: str | None
    totals: Usage
    breakdown: NotRequired[UsageBreakdown]


class MemoryPage(TypedDict):
    """The `MemoryPage` schema."""

    items: list[Memory]
    nextToken: str | None


class FactPage(TypedDict):
    """The `FactPage` schema."""

    items: list[Fact]
    nextToken: str | None


class ArchivePage(TypedDict):
    """The `ArchivePage` answer (inline in the document)."""

    items: list[ArchivedMessage]
    nextToken: str | None


class ConnectionDeleted(TypedDict):
    """The `ConnectionDeleted` answer (inline in the document)."""

    id: str
    deleted: Literal[True]
    agentsChanged: int
    grantRevoked: NotRequired[bool]


class ToolResult(TypedDict):
    """The `ToolResult` answer (inline in the document)."""

    toolUseId: str
    name: str
    complete: bool
    result: Any
