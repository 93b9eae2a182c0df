"""The HTTP client: one typed method per operation of docs/openapi.yaml (OPERATIONS maps each
operationId to its methods; tests/unit/test_client_drift.py holds the two together), paging
iterators over the lists, the error envelope as exceptions, retries of 429 and 503 with exponential
backoff that honours Retry-After, and live turns over the WebSocket API (engram_client.streaming)."""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict, Unpack, cast
from urllib.parse import quote

import httpx2

from . import errors
from .models import (
    AccountDeleted,
    ActiveMemory,
    Agent,
    AgentCreate,
    AgentCreated,
    AgentDeleted,
    AgentPage,
    AgentUpdate,
    ApiKey,
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPage,
    ArchivedMessage,
    ArchivePage,
    AuthorizationStart,
    CardType,
    CardTypeBody,
    CardTypePage,
    Connection,
    ConnectionCreate,
    ConnectionDeleted,
    ConnectionPage,
    ConnectionTest,
    ConnectionUpdate,
    ConnectionWithTools,
    Decision,
    DecisionPage,
    Deleted,
    Export,
    ExportStarted,
    ExportStatus,
    Fact,
    FactCreate,
    FactPage,
    FactUpdate,
    Health,
    Me,
    Memory,
    MemoryCreate,
    MemoryPage,
    MemoryUpdate,
    Run,
    RunAccepted,
    RunCreate,
    RunMemory,
    RunMemoryEntry,
    RunPage,
    RunStarted,
    RunTrace,
    Session,
    SessionCreate,
    SessionDetail,
    SessionPage,
    StreamTicket,
    ToolResult,
    TurnPaused,
    TurnResult,
    UsageBreakdown,
    UsagePage,
    UsageRow,
    UserLimits,
    WebhookSecretRotated,
    Workspace,
    WorkspaceCreate,
    WorkspacePage,
    WorkspaceUpdate,
)
from .streaming import Stream, StreamEvent

__all__ = ["OPERATIONS", "Client"]

DEFAULT_TIMEOUT = 60.0  # a sync turn may take 25 s on the server, plus the way there and back
RETRY_STATUSES = frozenset({429, 503})
USER_AGENT = "engram-client/0.1"


class Op(NamedTuple):
    method: str
    path: str
    methods: tuple[str, ...]  # the Client methods that call it


# operationId -> (HTTP method, path, the client's methods). Every operation of docs/openapi.yaml is
# here, and every method named exists with the path's ids as its leading arguments (drift test).
OPERATIONS: dict[str, Op] = {
    "createAgent": Op("POST", "/api/agents", ("create_agent",)),
    "listAgents": Op("GET", "/api/agents", ("list_agents", "iter_agents")),
    "getAgent": Op("GET", "/api/agents/{agentId}", ("get_agent",)),
    "updateAgent": Op("PATCH", "/api/agents/{agentId}", ("update_agent",)),
    "deleteAgent": Op("DELETE", "/api/agents/{agentId}", ("delete_agent",)),
    "createWorkspace": Op("POST", "/api/workspaces", ("create_workspace",)),
    "listWorkspaces": Op("GET", "/api/workspaces", ("list_workspaces", "iter_workspaces")),
    "getWorkspace": Op("GET", "/api/workspaces/{workspaceId}", ("get_workspace",)),
    "updateWorkspace": Op("PATCH", "/api/workspaces/{workspaceId}", ("update_workspace",)),
    "deleteWorkspace": Op("DELETE", "/api/workspaces/{workspaceId}", ("delete_workspace",)),
    "createSession": Op("POST", "/api/agents/{agentId}/sessions", ("create_session",)),
    "listSessions": Op("GET", "/api/agents/{agentId}/sessions", ("list_sessions", "iter_sessions")),
    "getSession": Op("GET", "/api/agents/{agentId}/sessions/{sessionId}", ("get_session",)),
    "deleteSession": Op("DELETE", "/api/agents/{agentId}/sessions/{sessionId}", ("delete_session",)),
    "searchArchive": Op("GET", "/api/agents/{agentId}/archive/search", ("search_archive", "iter_archive")),
    "postMessage": Op("POST", "/api/agents/{agentId}/sessions/{sessionId}/messages", ("send_message", "queue_message")),
    "rotateWebhookSecret": Op("POST", "/api/agents/{agentId}/webhook-secret", ("rotate_webhook_secret",)),
    "postWebhook": Op("POST", "/api/agents/{agentId}/webhook", ("post_webhook",)),
    "listRuns": Op("GET", "/api/agents/{agentId}/runs", ("list_runs", "iter_runs")),
    "listAllRuns": Op("GET", "/api/runs", ("list_all_runs", "iter_all_runs")),
    "createRun": Op("POST", "/api/agents/{agentId}/runs", ("create_run",)),
    "getActiveMemory": Op("GET", "/api/agents/{agentId}/active-memory", ("get_active_memory",)),
    "resetActiveMemory": Op("POST", "/api/agents/{agentId}/active-memory/reset", ("reset_active_memory",)),
    "getRun": Op("GET", "/api/runs/{runId}", ("get_run",)),
    "updateRun": Op("PATCH", "/api/runs/{runId}", ("update_run",)),
    "reExamineRun": Op("POST", "/api/runs/{runId}/re-examine", ("re_examine_run",)),
    "decideApproval": Op("POST", "/api/runs/{runId}/approvals", ("decide_approval",)),
    "listReExaminations": Op("GET", "/api/runs/{runId}/re-examinations", ("list_re_examinations", "iter_re_examinations")),
    "getRunMemory": Op("GET", "/api/runs/{runId}/memory", ("get_run_memory", "iter_run_memory")),
    "getHealth": Op("GET", "/api/health", ("health",)),
    "listUsage": Op("GET", "/api/usage", ("list_usage", "iter_usage")),
    "listAgentMemories": Op("GET", "/api/agents/{agentId}/memories", ("list_agent_memories", "iter_agent_memories")),
    "upsertAgentMemory": Op("POST", "/api/agents/{agentId}/memories", ("upsert_agent_memory",)),
    "updateAgentMemory": Op("PATCH", "/api/agents/{agentId}/memories/{memoryId}", ("update_agent_memory",)),
    "deleteAgentMemory": Op("DELETE", "/api/agents/{agentId}/memories/{memoryId}", ("delete_agent_memory",)),
    "pinAgentMemory": Op("PATCH", "/api/agents/{agentId}/memories/{memoryId}/pin", ("pin_agent_memory",)),
    "listWorkspaceMemories": Op(
        "GET", "/api/workspaces/{workspaceId}/memories", ("list_workspace_memories", "iter_workspace_memories")
    ),
    "upsertWorkspaceMemory": Op("POST", "/api/workspaces/{workspaceId}/memories", ("upsert_workspace_memory",)),
    "updateWorkspaceMemory": Op("PATCH", "/api/workspaces/{workspaceId}/memories/{memoryId}", ("update_workspace_memory",)),
    "deleteWorkspaceMemory": Op("DELETE", "/api/workspaces/{workspaceId}/memories/{memoryId}", ("delete_workspace_memory",)),
    "pinWorkspaceMemory": Op("PATCH", "/api/workspaces/{workspaceId}/memories/{memoryId}/pin", ("pin_workspace_memory",)),
    "listFacts": Op("GET", "/api/me/facts", ("list_facts", "iter_facts")),
    "addFact": Op("POST", "/api/me/facts", ("add_fact",)),
    "updateFact": Op("PATCH", "/api/me/facts/{factId}", ("update_fact",)),
    "archiveFact": Op("DELETE", "/api/me/facts/{factId}", ("archive_fact",)),
    "startExport": Op("POST", "/api/me/export", ("start_export",)),
    "exportMe": Op("GET", "/api/me/export", ("export_inline",)),
    "getExport": Op("GET", "/api/me/export/{exportId}", ("get_export",)),
    "deleteMe": Op("DELETE", "/api/me", ("delete_account",)),
    "getMe": Op("GET", "/api/me", ("get_me",)),
    "updateMe": Op("PATCH", "/api/me", ("update_me",)),
    "createApiKey": Op("POST", "/api/me/api-keys", ("create_api_key",)),
    "listApiKeys": Op("GET", "/api/me/api-keys", ("list_api_keys", "iter_api_keys")),
    "deleteApiKey": Op("DELETE", "/api/me/api-keys/{keyId}", ("delete_api_key",)),
    "mcp": Op("POST", "/mcp", ("mcp",)),
    "createStreamTicket": Op("POST", "/api/stream-tickets", ("create_stream_ticket",)),
    "createConnection": Op("POST", "/api/connections", ("create_connection",)),
    "listConnections": Op("GET", "/api/connections", ("list_connections", "iter_connections")),
    "getConnection": Op("GET", "/api/connections/{connectionId}", ("get_connection",)),
    "updateConnection": Op("PATCH", "/api/connections/{connectionId}", ("update_connection",)),
    "deleteConnection": Op("DELETE", "/api/connections/{connectionId}", ("delete_connection",)),
    "testConnection": Op("POST", "/api/connections/{connectionId}/test", ("test_connection",)),
    "refreshConnectionTools": Op("POST", "/api/connections/{connectionId}/refresh", ("refresh_connection_tools",)),
    "startConnectionAuthorization": Op(
        "POST", "/api/connections/{connectionId}/oauth/start", ("start_connection_authorization",)
    ),
    "getToolResult": Op("GET", "/api/runs/{runId}/tool-results/{toolUseId}", ("get_tool_result",)),
    "getRunTrace": Op("GET", "/api/runs/{runId}/trace", ("get_run_trace",)),
    "listCardTypes": Op("GET", "/api/card-types", ("list_card_types", "iter_card_types")),
    "getCardType": Op("GET", "/api/card-types/{name}", ("get_card_type",)),
    "putCardType": Op("PUT", "/api/card-types/{name}", ("put_card_type",)),
    "listDecisions": Op("GET", "/api/agents/{agentId}/decisions", ("list_decisions", "iter_decisions")),
}


class _Page(TypedDict):
    items: list[Any]
    nextToken: NotRequired[str | None]


def _seg(value: str) -> str:
    """One path segment: ids are `[A-Za-z0-9_-]`, anything else is quoted (and then refused as 400 invalid_id)."""
    return quote(str(value), safe="")


class _Keep:
    """A field an update leaves as it is (None would clear it)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


def _query(**params: Any) -> dict[str, str]:
    """Query parameters without the unset ones; booleans as the API spells them."""
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class Client:
    """Engram's HTTP API. `api_key` is an `egk_...` key, a sign-in token, or `dev-<user>` locally.

    `retries`: how many times a 429 or 503 (or a connection that could not be made) is sent again,
    waiting `backoff * 2**attempt` seconds (at most `max_backoff`, with jitter), or what the answer's
    `Retry-After` asks when it asks for longer. `timeout`: seconds per request."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        transport: httpx2.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._http = httpx2.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": USER_AGENT, "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.max_backoff, self.backoff * 2.0**attempt) * (0.5 + random.random() / 2)
        return max(backoff, min(retry_after, self.max_backoff)) if retry_after is not None else backoff

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        content = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json", **(headers or {})} if content is not None else headers
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path, content=content, params=params, headers=hdrs)
            except httpx2.ConnectError as err:  # nothing reached the server: safe to send again
                if attempt >= self.retries:
                    raise errors.TransportError(f"cannot reach {self.base_url}: {err}", code="connect_error") from err
                self._sleep(self._delay(attempt, None))
                attempt += 1
                continue
            except httpx2.TimeoutException as err:
                raise errors.TransportError(f"no answer within {self.timeout:g} s", code="timeout") from err
            except httpx2.HTTPError as err:
                raise errors.TransportError(str(err) or type(err).__name__, code="transport_error") from err
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                self._sleep(self._delay(attempt, retry_after_seconds(response.headers.get("Retry-After"))))
                attempt += 1
                continue
            return response

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The answer's `data`, or the error envelope raised as an EngramError."""
        response = self._send(method, path, body=body, params=params, headers=headers)
        try:
            decoded = response.json()
        except ValueError:
            decoded = None
        if response.status_code >= 400:
            raise errors.error_for(response.status_code, decoded, retry_after_seconds(response.headers.get("Retry-After")))
        if not isinstance(decoded, dict) or "data" not in decoded:
            raise errors.EngramError(f"unexpected answer to {method} {path}", code="bad_response", status=response.status_code)
        return decoded["data"]

    @staticmethod
    def _pages(fetch: Callable[[str | None], Any]) -> Iterator[Any]:
        token: str | None = None
        while True:
            page = cast(_Page, fetch(token))
            yield from page["items"]
            token = page.get("nextToken")
            if not token:
                return

    # --- agents -----------------------------------------------------------------------------------

    def create_agent(self, **body: Unpack[AgentCreate]) -> AgentCreated:
        return cast(AgentCreated, self._call("POST", "/api/agents", body=body))

    def list_agents(self, *, limit: int | None = None, next_token: str | None = None) -> AgentPage:
        return cast(AgentPage, self._call("GET", "/api/agents", params=_query(limit=limit, nextToken=next_token)))

    def iter_agents(self, *, limit: int | None = None) -> Iterator[Agent]:
        return self._pages(lambda token: self.list_agents(limit=limit, next_token=token))

    def get_agent(self, agent_id: str) -> Agent:
        return cast(Agent, self._call("GET", f"/api/agents/{_seg(agent_id)}"))

    def update_agent(self, agent_id: str, **body: Unpack[AgentUpdate]) -> Agent:
        return cast(Agent, self._call("PATCH", f"/api/agents/{_seg(agent_id)}", body=body))

    def delete_agent(self, agent_id: str) -> AgentDeleted:
        return cast(AgentDeleted, self._call("DELETE", f"/api/agents/{_seg(agent_id)}"))

    def rotate_webhook_secret(self, agent_id: str) -> WebhookSecretRotated:
        return cast(WebhookSecretRotated, self._call("POST", f"/api/agents/{_seg(agent_id)}/webhook-secret"))

    def post_webhook(
        self, agent_id: str, webhook_secret: str, message: str, *, session_id: str | None = None, timestamp: int | None = None
    ) -> RunAccepted:
        """A signed webhook delivery (HMAC-SHA256 of `<timestamp>.<body>` with the agent's secret)."""
        payload: dict[str, str] = {"message": message}
        if session_id is not None:
            payload["session_id"] = session_id
        raw = json.dumps(payload, separators=(",", ":"))
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        digest = hmac.new(webhook_secret.encode(), f"{stamp}.{raw}".encode(), hashlib.sha256).hexdigest()
        headers = {"X-Engram-Timestamp": stamp, "X-Engram-Signature": f"sha256={digest}"}
        return cast(RunAccepted, self._call("POST", f"/api/agents/{_seg(agent_id)}/webhook", body=payload, headers=headers))

    # --- workspaces ---------------------------------------------------------------------------------

    def create_workspace(self, **body: Unpack[WorkspaceCreate]) -> Workspace:
        return cast(Workspace, self._call("POST", "/api/workspaces", body=body))

    def list_workspaces(self, *, limit: int | None = None, next_token: str | None = None) -> WorkspacePage:
        return cast(WorkspacePage, self._call("GET", "/api/workspaces", params=_query(limit=limit, nextToken=next_token)))

    def iter_workspaces(self, *, limit: int | None = None) -> Iterator[Workspace]:
        return self._pages(lambda token: self.list_workspaces(limit=limit, next_token=token))

    def get_workspace(self, workspace_id: str) -> Workspace:
        return cast(Workspace, self._call("GET", f"/api/workspaces/{_seg(workspace_id)}"))

    def update_workspace(self, workspace_id: str, **body: Unpack[WorkspaceUpdate]) -> Workspace:
        return cast(Workspace, self._call("PATCH", f"/api/workspaces/{_seg(workspace_id)}", body=body))

    def delete_workspace(self, workspace_id: str) -> Deleted:
        return cast(Deleted, self._call("DELETE", f"/api/workspaces/{_seg(workspace_id)}"))

    # --- sessions and turns -------------------------------------------------------------------------

    def create_session(self, agent_id: str, **body: Unpack[SessionCreate]) -> Session:
        return cast(Session, self._call("POST", f"/api/agents/{_seg(agent_id)}/sessions", body=body))

    def list_sessions(self, agent_id: str, *, limit: int | None = None, next_token: str | None = None) -> SessionPage:
        path = f"/api/agents/{_seg(agent_id)}/sessions"
        return cast(SessionPage, self._call("GET", path, params=_query(limit=limit, nextToken=next_token)))

    def iter_sessions(self, agent_id: str, *, limit: int | None = None) -> Iterator[Session]:
        return self._pages(lambda token: self.list_sessions(agent_id, limit=limit, next_token=token))

    def get_session(self, agent_id: str, session_id: str) -> SessionDetail:
        return cast(SessionDetail, self._call("GET", f"/api/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}"))

    def delete_session(self, agent_id: str, session_id: str) -> Deleted:
        return cast(Deleted, self._call("DELETE", f"/api/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}"))

    def search_archive(self, agent_id: str, q: str, *, limit: int | None = None, next_token: str | None = None) -> ArchivePage:
        params = _query(q=q, limit=limit, nextToken=next_token)
        return cast(ArchivePage, self._call("GET", f"/api/agents/{_seg(agent_id)}/archive/search", params=params))

    def iter_archive(self, agent_id: str, q: str, *, limit: int | None = None) -> Iterator[ArchivedMessage]:
        return self._pages(lambda token: self.search_archive(agent_id, q, limit=limit, next_token=token))

    def send_message(
        self, agent_id: str, session_id: str, message: str, client_turn_id: str | None = None
    ) -> TurnResult | TurnPaused:
        """A synchronous turn: the reply, tool calls and usage (a 25 s budget on the server).
        `client_turn_id` names the turn (one is made when none is given): sent again with it, the
        turn is not run twice, and the answer is the first send's. A turn that paused for your
        approval of a tool call (TL10) answers `status: awaiting_approval` with its
        `pendingApprovals`: decide with approve / deny, then follow the run (wait_for_run)."""
        path = f"/api/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/messages"
        # Always named: this client retries a 503 (outcome_unknown among them), and a retry with
        # the same id gets the first outcome instead of running the turn twice.
        body = {"message": message, "clientTurnId": client_turn_id or f"py-{uuid.uuid4().hex}"}
        return cast(TurnResult | TurnPaused, self._call("POST", path, body=body))

    def queue_message(self, agent_id: str, session_id: str, message: str, client_turn_id: str | None = None) -> RunAccepted:
        """An asynchronous turn (`?async=true`): follow it with get_run or a stream subscription.
        `client_turn_id`: a resend answers with the run the first send queued."""
        path = f"/api/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/messages"
        body = {"message": message, **({"clientTurnId": client_turn_id} if client_turn_id else {})}
        return cast(RunAccepted, self._call("POST", path, body=body, params={"async": "true"}))

    # --- runs ---------------------------------------------------------------------------------------

    def list_runs(
        self,
        agent_id: str,
        *,
        limit: int | None = None,
        next_token: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        status: str | None = None,
    ) -> RunPage:
        path = f"/api/agents/{_seg(agent_id)}/runs"
        params = _query(limit=limit, nextToken=next_token, q=q, kind=kind, status=status)
        return cast(RunPage, self._call("GET", path, params=params))

    def iter_runs(
        self,
        agent_id: str,
        *,
        limit: int | None = None,
        q: str | None = None,
        kind: str | None = None,
        status: str | None = None,
    ) -> Iterator[Run]:
        return self._pages(lambda token: self.list_runs(agent_id, limit=limit, next_token=token, q=q, kind=kind, status=status))

    def list_all_runs(
        self,
        *,
        agent_id: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        q: str | None = None,
        council_run_id: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> RunPage:
        """Runs across the caller's agents, newest first: `kind` and `status` comma-separated,
        `since`/`until` a day or a UTC time; a page can hold fewer than `limit` runs."""
        params = _query(
            agentId=agent_id,
            kind=kind,
            status=status,
            since=since,
            until=until,
            q=q,
            councilRunId=council_run_id,
            limit=limit,
            nextToken=next_token,
        )
        return cast(RunPage, self._call("GET", "/api/runs", params=params))

    def iter_all_runs(
        self,
        *,
        agent_id: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        q: str | None = None,
        council_run_id: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Run]:
        return self._pages(
            lambda token: self.list_all_runs(
                agent_id=agent_id,
                kind=kind,
                status=status,
                since=since,
                until=until,
                q=q,
                council_run_id=council_run_id,
                limit=limit,
                next_token=token,
            )
        )

    def create_run(self, agent_id: str, **body: Unpack[RunCreate]) -> RunStarted:
        return cast(RunStarted, self._call("POST", f"/api/agents/{_seg(agent_id)}/runs", body=body))

    def get_run(self, run_id: str) -> Run:
        return cast(Run, self._call("GET", f"/api/runs/{_seg(run_id)}"))

    def wait_for_run(self, run_id: str, *, timeout: float = 120.0, interval: float = 0.25) -> Run:
        """Poll get_run until the run has succeeded or failed, or waits for your approval of a tool
        call (`awaiting_approval`, TL10); TimeoutError past `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id)
            if run["status"] in ("succeeded", "failed", "awaiting_approval"):
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {run['status']} after {timeout:g} s")
            self._sleep(interval)

    def update_run(self, run_id: str, resolution_status: Literal["open", "resolved", "expired"]) -> Run:
        return cast(Run, self._call("PATCH", f"/api/runs/{_seg(run_id)}", body={"resolutionStatus": resolution_status}))

    # --- approvals (TL10) ----------------------------------------------------------------------------

    def decide_approval(
        self, run_id: str, tool_use_id: str, decision: Literal["approve", "deny"], note: str | None = None
    ) -> Run:
        """Decides one tool call the run holds for your approval; the run resumes once every one is decided."""
        body = {"toolUseId": tool_use_id, "decision": decision, **({"note": note} if note else {})}
        return cast(Run, self._call("POST", f"/api/runs/{_seg(run_id)}/approvals", body=body))

    def approve(self, run_id: str, tool_use_id: str, note: str | None = None) -> Run:
        return self.decide_approval(run_id, tool_use_id, "approve", note)

    def deny(self, run_id: str, tool_use_id: str, note: str | None = None) -> Run:
        return self.decide_approval(run_id, tool_use_id, "deny", note)

    def iter_waiting(self, *, agent_id: str | None = None, limit: int | None = None) -> Iterator[Run]:
        """Runs across your agents that wait for your approval of a tool call, newest first."""
        return self.iter_all_runs(agent_id=agent_id, status="awaiting_approval", limit=limit)

    def re_examine_run(self, run_id: str) -> RunStarted:
        return cast(RunStarted, self._call("POST", f"/api/runs/{_seg(run_id)}/re-examine"))

    def list_re_examinations(self, run_id: str, *, limit: int | None = None, next_token: str | None = None) -> RunPage:
        path = f"/api/runs/{_seg(run_id)}/re-examinations"
        return cast(RunPage, self._call("GET", path, params=_query(limit=limit, nextToken=next_token)))

    def iter_re_examinations(self, run_id: str, *, limit: int | None = None) -> Iterator[Run]:
        return self._pages(lambda token: self.list_re_examinations(run_id, limit=limit, next_token=token))

    def get_run_memory(self, run_id: str, *, limit: int | None = None, next_token: str | None = None) -> RunMemory:
        path = f"/api/runs/{_seg(run_id)}/memory"
        return cast(RunMemory, self._call("GET", path, params=_query(limit=limit, nextToken=next_token)))

    def iter_run_memory(self, run_id: str, *, limit: int | None = None) -> Iterator[RunMemoryEntry]:
        return self._pages(lambda token: self.get_run_memory(run_id, limit=limit, next_token=token))

    def get_tool_result(self, run_id: str, tool_use_id: str) -> ToolResult:
        return cast(ToolResult, self._call("GET", f"/api/runs/{_seg(run_id)}/tool-results/{_seg(tool_use_id)}"))

    def get_run_trace(self, run_id: str) -> RunTrace:
        """The run's timeline (OB1): spans in start order, each with its parent, depth and times."""
        return cast(RunTrace, self._call("GET", f"/api/runs/{_seg(run_id)}/trace"))

    def get_active_memory(self, agent_id: str) -> ActiveMemory:
        return cast(ActiveMemory, self._call("GET", f"/api/agents/{_seg(agent_id)}/active-memory"))

    def reset_active_memory(self, agent_id: str) -> ActiveMemory:
        return cast(ActiveMemory, self._call("POST", f"/api/agents/{_seg(agent_id)}/active-memory/reset"))

    def list_decisions(self, agent_id: str, *, limit: int | None = None, next_token: str | None = None) -> DecisionPage:
        path = f"/api/agents/{_seg(agent_id)}/decisions"
        return cast(DecisionPage, self._call("GET", path, params=_query(limit=limit, nextToken=next_token)))

    def iter_decisions(self, agent_id: str, *, limit: int | None = None) -> Iterator[Decision]:
        return self._pages(lambda token: self.list_decisions(agent_id, limit=limit, next_token=token))

    # --- usage and health ---------------------------------------------------------------------------

    def list_usage(
        self,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        from_: str | None = None,
        to: str | None = None,
    ) -> UsagePage:
        """A page of usage rows and (without `session_id`) the `breakdown` of the usage totals
        over the UTC days `from_`..`to` (YYYY-MM-DD; default the last 30 days): per day, model,
        kind and agent, cache savings, and what is spent against the limits."""
        params = _query(agentId=agent_id, sessionId=session_id, limit=limit, nextToken=next_token, to=to, **{"from": from_})
        return cast(UsagePage, self._call("GET", "/api/usage", params=params))

    def usage_breakdown(self, *, agent_id: str | None = None, from_: str | None = None, to: str | None = None) -> UsageBreakdown:
        """The breakdown alone (the caller's, or one agent's), with the smallest page of rows."""
        return self.list_usage(agent_id=agent_id, from_=from_, to=to, limit=1)["breakdown"]

    def iter_usage(
        self,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        from_: str | None = None,
        to: str | None = None,
    ) -> Iterator[UsageRow]:
        return self._pages(
            lambda token: self.list_usage(
                agent_id=agent_id, session_id=session_id, limit=limit, next_token=token, from_=from_, to=to
            )
        )

    def health(self) -> Health:
        return cast(Health, self._call("GET", "/api/health"))

    # --- memories (agent and workspace scope) -------------------------------------------------------

    # One implementation per verb for both scopes; the typed methods below name the scope.
    def _list_memories(
        self,
        base: str,
        include_archived: bool | None,
        limit: int | None,
        next_token: str | None,
        q: str | None = None,
        source: str | None = None,
    ) -> MemoryPage:
        params = _query(includeArchived=include_archived, limit=limit, nextToken=next_token, q=q, source=source)
        return cast(MemoryPage, self._call("GET", base, params=params))

    def _memory(self, method: str, base: str, memory_id: str | None = None, suffix: str = "", body: Any = None) -> Any:
        path = base if memory_id is None else f"{base}/{_seg(memory_id)}{suffix}"
        return self._call(method, path, body=body)

    def list_agent_memories(
        self,
        agent_id: str,
        *,
        include_archived: bool | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        q: str | None = None,
        source: str | None = None,
    ) -> MemoryPage:
        """`q`: rows matching these words, best first; `source`: e.g. "manual,chat"."""
        return self._list_memories(f"/api/agents/{_seg(agent_id)}/memories", include_archived, limit, next_token, q, source)

    def iter_agent_memories(
        self,
        agent_id: str,
        *,
        include_archived: bool | None = None,
        limit: int | None = None,
        q: str | None = None,
        source: str | None = None,
    ) -> Iterator[Memory]:
        return self._pages(
            lambda token: self.list_agent_memories(
                agent_id, include_archived=include_archived, limit=limit, next_token=token, q=q, source=source
            )
        )

    def upsert_agent_memory(self, agent_id: str, **body: Unpack[MemoryCreate]) -> Memory:
        return cast(Memory, self._memory("POST", f"/api/agents/{_seg(agent_id)}/memories", body=body))

    def update_agent_memory(self, agent_id: str, memory_id: str, **body: Unpack[MemoryUpdate]) -> Memory:
        return cast(Memory, self._memory("PATCH", f"/api/agents/{_seg(agent_id)}/memories", memory_id, body=body))

    def delete_agent_memory(self, agent_id: str, memory_id: str) -> Deleted:
        return cast(Deleted, self._memory("DELETE", f"/api/agents/{_seg(agent_id)}/memories", memory_id))

    def pin_agent_memory(self, agent_id: str, memory_id: str, pinned: bool = True) -> Memory:
        return cast(
            Memory, self._memory("PATCH", f"/api/agents/{_seg(agent_id)}/memories", memory_id, "/pin", {"pinned": pinned})
        )

    def list_workspace_memories(
        self,
        workspace_id: str,
        *,
        include_archived: bool | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        q: str | None = None,
        source: str | None = None,
    ) -> MemoryPage:
        base = f"/api/workspaces/{_seg(workspace_id)}/memories"
        return self._list_memories(base, include_archived, limit, next_token, q, source)

    def iter_workspace_memories(
        self,
        workspace_id: str,
        *,
        include_archived: bool | None = None,
        limit: int | None = None,
        q: str | None = None,
        source: str | None = None,
    ) -> Iterator[Memory]:
        return self._pages(
            lambda token: self.list_workspace_memories(
                workspace_id, include_archived=include_archived, limit=limit, next_token=token, q=q, source=source
            )
        )

    def upsert_workspace_memory(self, workspace_id: str, **body: Unpack[MemoryCreate]) -> Memory:
        return cast(Memory, self._memory("POST", f"/api/workspaces/{_seg(workspace_id)}/memories", body=body))

    def update_workspace_memory(self, workspace_id: str, memory_id: str, **body: Unpack[MemoryUpdate]) -> Memory:
        return cast(Memory, self._memory("PATCH", f"/api/workspaces/{_seg(workspace_id)}/memories", memory_id, body=body))

    def delete_workspace_memory(self, workspace_id: str, memory_id: str) -> Deleted:
        return cast(Deleted, self._memory("DELETE", f"/api/workspaces/{_seg(workspace_id)}/memories", memory_id))

    def pin_workspace_memory(self, workspace_id: str, memory_id: str, pinned: bool = True) -> Memory:
        base = f"/api/workspaces/{_seg(workspace_id)}/memories"
        return cast(Memory, self._memory("PATCH", base, memory_id, "/pin", {"pinned": pinned}))

    # --- facts, account, keys -----------------------------------------------------------------------

    def list_facts(
        self,
        *,
        include_archived: bool | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        q: str | None = None,
    ) -> FactPage:
        params = _query(includeArchived=include_archived, limit=limit, nextToken=next_token, q=q)
        return cast(FactPage, self._call("GET", "/api/me/facts", params=params))

    def iter_facts(
        self, *, include_archived: bool | None = None, limit: int | None = None, q: str | None = None
    ) -> Iterator[Fact]:
        return self._pages(lambda token: self.list_facts(include_archived=include_archived, limit=limit, next_token=token, q=q))

    def add_fact(self, **body: Unpack[FactCreate]) -> Fact:
        return cast(Fact, self._call("POST", "/api/me/facts", body=body))

    def update_fact(self, fact_id: str, **body: Unpack[FactUpdate]) -> Fact:
        return cast(Fact, self._call("PATCH", f"/api/me/facts/{_seg(fact_id)}", body=body))

    def archive_fact(self, fact_id: str) -> Fact:
        return cast(Fact, self._call("DELETE", f"/api/me/facts/{_seg(fact_id)}"))

    def start_export(self) -> ExportStarted:
        return cast(ExportStarted, self._call("POST", "/api/me/export"))

    def get_export(self, export_id: str) -> ExportStatus:
        return cast(ExportStatus, self._call("GET", f"/api/me/export/{_seg(export_id)}"))

    def export_inline(self) -> Export:
        """The deprecated one-response export (413 export_too_large past 4 MB): prefer start_export."""
        return cast(Export, self._call("GET", "/api/me/export"))

    def get_me(self) -> Me:
        """The caller's name (the speaker of their archived turns), or None."""
        return cast(Me, self._call("GET", "/api/me"))

    def update_me(self, name: str | None | _Keep = KEEP, *, limits: UserLimits | None | _Keep = KEEP) -> Me:
        """Sets the caller's name (None removes it) and/or their spending limits over all their
        agents (`{"dailyCostUsd": 5}`; None or {} removes them); what is not given stays."""
        body: dict[str, object] = {}
        if not isinstance(name, _Keep):
            body["name"] = name
        if not isinstance(limits, _Keep):
            body["limits"] = limits
        return cast(Me, self._call("PATCH", "/api/me", body=body))

    def delete_account(self) -> AccountDeleted:
        """Delete everything stored about the caller (a sign-in token only; a key gets 403)."""
        return cast(AccountDeleted, self._call("DELETE", "/api/me"))

    def create_api_key(self, **body: Unpack[ApiKeyCreate]) -> ApiKeyCreated:
        return cast(ApiKeyCreated, self._call("POST", "/api/me/api-keys", body=body))

    def list_api_keys(self, *, limit: int | None = None, next_token: str | None = None) -> ApiKeyPage:
        return cast(ApiKeyPage, self._call("GET", "/api/me/api-keys", params=_query(limit=limit, nextToken=next_token)))

    def iter_api_keys(self, *, limit: int | None = None) -> Iterator[ApiKey]:
        return self._pages(lambda token: self.list_api_keys(limit=limit, next_token=token))

    def delete_api_key(self, key_id: str) -> Deleted:
        return cast(Deleted, self._call("DELETE", f"/api/me/api-keys/{_seg(key_id)}"))

    # --- connections (MCP tool servers) -------------------------------------------------------------

    def create_connection(self, **body: Unpack[ConnectionCreate]) -> Connection:
        return cast(Connection, self._call("POST", "/api/connections", body=body))

    def list_connections(self, *, limit: int | None = None, next_token: str | None = None) -> ConnectionPage:
        return cast(ConnectionPage, self._call("GET", "/api/connections", params=_query(limit=limit, nextToken=next_token)))

    def iter_connections(self, *, limit: int | None = None) -> Iterator[Connection]:
        return self._pages(lambda token: self.list_connections(limit=limit, next_token=token))

    def get_connection(self, connection_id: str) -> ConnectionWithTools:
        return cast(ConnectionWithTools, self._call("GET", f"/api/connections/{_seg(connection_id)}"))

    def update_connection(self, connection_id: str, **body: Unpack[ConnectionUpdate]) -> Connection:
        return cast(Connection, self._call("PATCH", f"/api/connections/{_seg(connection_id)}", body=body))

    def delete_connection(self, connection_id: str) -> ConnectionDeleted:
        return cast(ConnectionDeleted, self._call("DELETE", f"/api/connections/{_seg(connection_id)}"))

    def test_connection(self, connection_id: str) -> ConnectionTest:
        return cast(ConnectionTest, self._call("POST", f"/api/connections/{_seg(connection_id)}/test"))

    def refresh_connection_tools(self, connection_id: str) -> ConnectionTest:
        return cast(ConnectionTest, self._call("POST", f"/api/connections/{_seg(connection_id)}/refresh"))

    def start_connection_authorization(self, connection_id: str) -> AuthorizationStart:
        """An OAuth connection: the URL a person opens in a browser to grant Engram access."""
        return cast(AuthorizationStart, self._call("POST", f"/api/connections/{_seg(connection_id)}/oauth/start"))

    # --- card types ---------------------------------------------------------------------------------

    def list_card_types(self, *, limit: int | None = None, next_token: str | None = None) -> CardTypePage:
        return cast(CardTypePage, self._call("GET", "/api/card-types", params=_query(limit=limit, nextToken=next_token)))

    def iter_card_types(self, *, limit: int | None = None) -> Iterator[CardType]:
        return self._pages(lambda token: self.list_card_types(limit=limit, next_token=token))

    def get_card_type(self, name: str) -> CardType:
        return cast(CardType, self._call("GET", f"/api/card-types/{_seg(name)}"))

    def put_card_type(self, name: str, **body: Unpack[CardTypeBody]) -> CardType:
        return cast(CardType, self._call("PUT", f"/api/card-types/{_seg(name)}", body=body))

    # --- MCP and streaming --------------------------------------------------------------------------

    def mcp(self, message: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC message to Engram's MCP server (`POST /mcp`); its JSON-RPC answer, or {} for a notification."""
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
        response = self._send("POST", "/mcp", body=message, headers=headers)
        if response.status_code >= 400:
            try:
                decoded = response.json()
            except ValueError:
                decoded = None
            raise errors.error_for(response.status_code, decoded)
        return cast(dict[str, Any], response.json()) if response.content else {}

    def create_stream_ticket(self) -> StreamTicket:
        return cast(StreamTicket, self._call("POST", "/api/stream-tickets"))

    def stream(self, *, open_timeout: float = 10.0) -> Stream:
        """A socket on the WebSocket API (a fresh one-time ticket opens it): `with client.stream() as s:`."""
        return Stream.open(
            self.create_stream_ticket(), open_timeout=open_timeout, timeout=self.timeout, tickets=self.create_stream_ticket
        )

    def stream_turn(
        self, agent_id: str, session_id: str, message: str, *, client_turn_id: str | None = None
    ) -> Iterator[StreamEvent]:
        """One turn over its own socket: its events as they arrive, up to turn.completed or turn.failed."""
        with self.stream() as stream:
            yield from stream.turn(agent_id, session_id, message, client_turn_id=client_turn_id or uuid.uuid4().hex)
