"""Every key shape of the single table and the bucket, in one place.

Every partition key starts with the tenant, so a query built from one principal's tenant can
never reach another's rows. The one exception is the GSI2 lookup a webhook needs (it arrives
without a principal): it maps an agent id to its tenant and is only used after the HMAC check;
and GSI3's open-run shards, read only by the sweeper (no principal either), which marks the runs
it finds there failed in their own tenant's partition.
Ids are validated here, before they can reach a key or an S3 path.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id


def tenant_pk(tenant: str) -> str:
    return tenant


def workspace_sk(workspace_id: str) -> str:
    return f"WS#{check_id('workspaceId', workspace_id)}"


def agent_sk(agent_id: str) -> str:
    return f"AGENT#{check_id('agentId', agent_id)}"


def agent_lookup(agent_id: str) -> str:
    return f"AGENTID#{check_id('agentId', agent_id)}"


def agent_pk(tenant: str, agent_id: str) -> str:
    """The partition holding everything of one agent: sessions, memories, archive, run memory, markers."""
    return f"{tenant}#A#{check_id('agentId', agent_id)}"


def webhook_delivery_sk(digest: str) -> str:
    """A signed webhook request seen (its signature's hex digest), kept for the tolerance window."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError("a webhook delivery is named by a 64-character hex digest")
    return f"DELIVERY#{digest}"


def session_sk(session_id: str) -> str:
    return f"SESSION#{check_id('sessionId', session_id)}"


def run_sk(run_id: str) -> str:
    return f"RUN#{check_id('runId', run_id)}"


# A run's timeline (OB1): one item per part (the turn's, written in its commit; each job it caused
# writes its own), in its agent's partition, so the agent cascade removes it with the run.
TRACE_PREFIX = "TRACE#"


def trace_prefix(run_id: str) -> str:
    return f"{TRACE_PREFIX}{check_id('runId', run_id)}#"


def trace_sk(run_id: str, part: str) -> str:
    return f"{trace_prefix(run_id)}{check_id('part', part)}"


ACTIVE_TURN_PREFIX = "ACTIVETURN#"


def active_turn_sk(run_id: str) -> str:
    """A queued or running turn of the tenant, counted against its cap (ST7) until it ends."""
    return f"{ACTIVE_TURN_PREFIX}{check_id('runId', run_id)}"


OPEN_RUN_SHARDS = 8


def open_runs(run_id: str) -> str:
    """GSI3 partition of unfinished (queued or running) runs, sparse, across tenants: the sweeper
    reads each shard's runs past their stale time. A run's shard comes from its id."""
    return f"OPENRUNS#{int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) % OPEN_RUN_SHARDS}"


def open_runs_shards() -> list[str]:
    return [f"OPENRUNS#{i}" for i in range(OPEN_RUN_SHARDS)]


def runs_by_agent(tenant: str, agent_id: str) -> str:
    return f"{tenant}#A#{check_id('agentId', agent_id)}#RUNS"


def usage_pk(tenant: str) -> str:
    return f"{tenant}#USAGE"


def usage_by_agent(tenant: str, agent_id: str) -> str:
    return f"{tenant}#USAGE#A#{check_id('agentId', agent_id)}"


def usage_totals_pk(tenant: str) -> str:
    """The usage totals (TL10, OB4): per day and month, the person's and each agent's, added to
    with every usage row; and the person's spending limits."""
    return f"{tenant}#USAGETOTALS"


USAGE_LIMITS_SK = "LIMITS"


def usage_total_sk(period: str, agent_id: str | None = None) -> str:
    """A day (`2026-11-27`) or a month (`2026-11`) of the person's usage, or of one agent's."""
    if not re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", period):
        raise ValueError("a usage period is a UTC day (YYYY-MM-DD) or month (YYYY-MM)")
    span = f"{'D' if len(period) == 10 else 'M'}#{period}"
    return f"A#{check_id('agentId', agent_id)}#{span}" if agent_id else f"U#{span}"


def session_object(tenant: str, agent_id: str, session_id: str) -> str:
    return f"{session_prefix(tenant, agent_id)}{check_id('sessionId', session_id)}.json"


def session_prefix(tenant: str, agent_id: str) -> str:
    return f"state/sessions/{tenant}/{check_id('agentId', agent_id)}/"


# --- long-term memory and user facts ----------------------------------------------------------
def workspace_pk(tenant: str, workspace_id: str) -> str:
    """The partition holding a workspace's shared memory."""
    return f"{tenant}#W#{check_id('workspaceId', workspace_id)}"


def user_pk(tenant: str) -> str:
    """The partition holding the principal's own facts."""
    return f"{tenant}#U"


def memory_sk(memory_id: str) -> str:
    return f"MEM#{check_id('memoryId', memory_id)}"


def fact_sk(fact_id: str) -> str:
    return f"FACT#{check_id('factId', fact_id)}"


def fact_text_sk(digest: str) -> str:
    """The duplicate check of user facts: one row per normalised fact text (its SHA-256), naming
    the fact that holds it, so adding a fact reads one row however many facts exist."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError("a fact text is named by a 64-character hex digest")
    return f"FACTTEXT#{digest}"


# Present once every active fact of the partition has its FACTTEXT row (facts written before the
# rows existed are indexed by the first add that finds it missing).
FACT_TEXT_INDEXED_SK = "FACTTEXT"


def memory_rank_pk(owner_pk: str) -> str:
    """GSI2 partition of an owner's active memories, sorted for injection (sparse: active rows only)."""
    return f"{owner_pk}#MEMRANK"


def fact_rank_pk(tenant: str) -> str:
    return f"{tenant}#U#FACTRANK"


# --- conversation archive (recall/archive.py) ---------------------------------------------------
# Items live in the agent partition (so the agent cascade removes them) under
#   SK     ARCH#<sessionId>#<createdAt>#<runId>#<seq>    (a session's archive is one begins_with Query)
#   GSI1PK <t>#A#<agentId>#ARCH
#   GSI1SK <archivedAt>#<sessionId>#<runId>#<seq>        (a cache fetches only what is newer than it holds)
# A deleted session leaves a short-lived tombstone in the same GSI1 partition so that warm caches
# in other containers drop its turns: SK ARCHDEL#<sessionId>#<deletedAt>, GSI1SK <deletedAt>#~del#<sessionId>.
_STAMP_CHARS = frozenset("0123456789-:.TZ+")


def check_stamp(field: str, value: object) -> str:
    """An ISO-8601 timestamp as this project writes them: sortable, and never carrying a key separator."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40 or not set(value) <= _STAMP_CHARS:
        raise BadRequest(f"{field} must be an ISO-8601 timestamp", field=field, code="invalid_timestamp")
    return value


def archive_prefix() -> str:
    return "ARCH#"


def archive_session_prefix(session_id: str) -> str:
    return f"ARCH#{check_id('sessionId', session_id)}#"


def archive_sk(session_id: str, created_at: str, run_id: str, seq: int) -> str:
    return (
        f"{archive_session_prefix(session_id)}{check_stamp('createdAt', created_at)}#{check_id('runId', run_id)}#{int(seq):04d}"
    )


def archive_by_agent(tenant: str, agent_id: str) -> str:
    return f"{tenant}#A#{check_id('agentId', agent_id)}#ARCH"


def archive_gsi_sk(archived_at: str, session_id: str, run_id: str, seq: int) -> str:
    return (
        f"{check_stamp('archivedAt', archived_at)}#{check_id('sessionId', session_id)}#{check_id('runId', run_id)}#{int(seq):04d}"
    )


def archive_tombstone_sk(session_id: str, deleted_at: str) -> str:
    return f"ARCHDEL#{check_id('sessionId', session_id)}#{check_stamp('deletedAt', deleted_at)}"


def archive_tombstone_gsi_sk(deleted_at: str, session_id: str) -> str:
    return f"{check_stamp('deletedAt', deleted_at)}#~del#{check_id('sessionId', session_id)}"


# --- automatic extraction (extraction/repository.py) ------------------------------------------
def extract_marker_sk(run_id: str) -> str:
    """The once-per-run marker of an extraction job, in the agent partition (the cascade removes it)."""
    return f"EXTRACT#{check_id('runId', run_id)}"


# --- card types (cards/repository.py) ---------------------------------------------------------
def card_type_sk(name: str) -> str:
    """A custom card type of the tenant, in the tenant partition (built-ins are not stored)."""
    return f"CARDTYPE#{check_id('name', name)}"


# --- runs: re-examinations, run memory, director learnings (runs/, run_memory/repository.py) ---
def reexaminations_of(tenant: str, parent_run_id: str) -> str:
    """GSI2 partition listing the re-examinations of one run (sparse: only those runs carry it)."""
    return f"{tenant}#RUN#{check_id('runId', parent_run_id)}#REEXAM"


RUN_MEMORY_KEY_PATTERN = r"^(input|step|task|shared):[A-Za-z0-9_.:-]{1,120}$"
_RUN_MEMORY_KEY = re.compile(RUN_MEMORY_KEY_PATTERN)


def run_memory_prefix(run_id: str) -> str:
    """A run's memory lives in its (lead) agent's partition, so the agent cascade removes it."""
    return f"RUNMEM#{check_id('runId', run_id)}#"


def run_memory_sk(run_id: str, key: str) -> str:
    if not isinstance(key, str) or not _RUN_MEMORY_KEY.match(key):
        raise BadRequest(
            "a run memory key is <input|step|task|shared>:<1-120 of A-Z a-z 0-9 _ . : ->", field="key", code="invalid_key"
        )
    return f"{run_memory_prefix(run_id)}{key}"


def learnings_by_agent(tenant: str, agent_id: str) -> str:
    """GSI1 partition of an agent's director learnings, newest last by createdAt."""
    return f"{tenant}#A#{check_id('agentId', agent_id)}#LEARN"


# --- account exports (account/) ---------------------------------------------------------------
def export_sk(export_id: str) -> str:
    """An export job's row, in the tenant partition (expires with its object)."""
    return f"EXPORT#{check_id('exportId', export_id)}"


def export_prefix(tenant: str) -> str:
    """Every export object of a tenant: the bucket's lifecycle rule expires `exports/`."""
    return f"exports/{tenant}/"


def export_object(tenant: str, export_id: str) -> str:
    return f"{export_prefix(tenant)}{check_id('exportId', export_id)}.jsonl"


# --- MCP tool connections (connections/) --------------------------------------------------------
def connection_sk(connection_id: str) -> str:
    """A connection to a remote MCP server, in the tenant partition."""
    return f"CONN#{check_id('connectionId', connection_id)}"


def connection_tools_sk(connection_id: str) -> str:
    """The cached tool list of a connection (expires by TTL; a refresh replaces it)."""
    return f"CONNTOOLS#{check_id('connectionId', connection_id)}"


def oauth_state_pk(state_hash: str) -> str:
    """An OAuth authorization in flight (TL9), found by the SHA-256 of its `state` (the callback
    carries no principal); one-time, expiring by TTL."""
    if len(state_hash) != 64 or any(c not in "0123456789abcdef" for c in state_hash):
        raise ValueError("an OAuth state key is a SHA-256 in hex")
    return f"OAUTHSTATE#{state_hash}"


def tool_result_object(tenant: str, agent_id: str, run_id: str, tool_use_id: str) -> str:
    """The full result of a tool call that was cut before it reached the model, beside the agent's
    transcripts (deleting the agent deletes it)."""
    return f"{session_prefix(tenant, agent_id)}tool-results/{check_id('runId', run_id)}/{check_id('toolUseId', tool_use_id)}.json"


# --- personal API keys (apikeys/) ---------------------------------------------------------------
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
API_KEY_LOOKUP_SK = "APIKEY"


def api_key_sk(key_id: str) -> str:
    """An API key as its owner lists it (no hash of it), in the tenant partition."""
    return f"APIKEY#{check_id('keyId', key_id)}"


def api_key_lookup_pk(digest: str) -> str:
    """The row the authorizer reads: its own partition, named by the key's SHA-256 (no tenant in
    it: the request that brings a key has no principal yet). The authorizer's IAM policy allows
    only partitions with this prefix."""
    if not _DIGEST.match(digest):
        raise BadRequest("not a key digest", field="key")
    return f"APIKEY#{digest}"


def auth_failures_pk(source: str) -> str:
    """Failed sign-in attempts from one source address (the authorizer's throttle, MX6): SK is
    the minute, the row expires with the table's TTL."""
    return f"AUTHFAIL#{source}"


# --- the WebSocket API (ST2) ----------------------------------------------------------------------
# A ticket and a connection are presented without a principal (the socket carries no token), so,
# like the webhook's agent lookup, their rows are keyed by their own id and name their tenant; a
# ticket is only written for a verified JWT, a connection only by a $connect that took a ticket.
# A connection is also counted in its tenant's partition (the per-user quota), and a session's
# subscribers sit in the agent's partition (the agent's cascade removes them).
_TICKET = re.compile(r"[A-Za-z0-9_-]{20,64}")
_CONNECTION = re.compile(r"[A-Za-z0-9+/=_-]{1,128}")
STREAM_TICKET_SK = "TICKET"
STREAM_CONNECTION_SK = "CONN"


def stream_ticket_pk(ticket: str) -> str:
    if not isinstance(ticket, str) or not _TICKET.fullmatch(ticket):
        raise BadRequest("the ticket is not one Engram issued", field="ticket", code="invalid_ticket")
    return f"STREAMTICKET#{ticket}"


def _connection_id(connection_id: str) -> str:
    if not isinstance(connection_id, str) or not _CONNECTION.fullmatch(connection_id):
        raise ValueError("a connection id is what API Gateway hands out: letters, digits, +/=_-")
    return connection_id


def stream_connection_pk(connection_id: str) -> str:
    return f"STREAMCONN#{_connection_id(connection_id)}"


def stream_connection_sk(connection_id: str) -> str:
    """The connection's row in its tenant's partition (the quota counts these)."""
    return f"STREAMCONN#{_connection_id(connection_id)}"


def stream_subscription_prefix(session_id: str) -> str:
    return f"STREAMSUB#{check_id('sessionId', session_id)}#"


def stream_subscription_sk(session_id: str, connection_id: str) -> str:
    return f"{stream_subscription_prefix(session_id)}{_connection_id(connection_id)}"


def stream_client_turn_sk(agent_id: str, session_id: str, client_turn_id: str) -> str:
    """A turn a client sent (its clientTurnId, scoped to the agent and session), naming its run:
    a resent turn is not run twice, and the same id on another session is another turn (ST4)."""
    ids = (check_id("agentId", agent_id), check_id("sessionId", session_id), check_id("clientTurnId", client_turn_id))
    return "STREAMTURN#" + "#".join(ids)


def stream_event_prefix(run_id: str) -> str:
    return f"STREAMEVENT#{check_id('runId', run_id)}#"


def stream_event_sk(run_id: str, seq: int) -> str:
    """One kept event of a turn (ST5: a socket resumes from it), in order of its seq."""
    return f"{stream_event_prefix(run_id)}{seq:06d}"


# --- sort-key pieces ------------------------------------------------------------------------------
_MAX_EPOCH_MS = 9_999_999_999_999


def epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def inverse_recency(iso: str) -> int:
    """Newest first in an ascending sort key (memories' and facts' rank and recency indexes)."""
    return _MAX_EPOCH_MS - epoch_ms(iso)
