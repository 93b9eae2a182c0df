"""The caller's whole account: export everything stored about them, or delete all of it.

An export is a job (POST /api/me/export): a row with its status and progress, and a message on
the run queue; the heartbeat function streams the account as JSON Lines to S3 in parts (bounded
memory) and the API hands out a short-lived presigned URL of the object. Objects and rows
expire after EXPORT_RETENTION_DAYS. GET /api/me/export (the old one-response export) is kept,
deprecated, for accounts under INLINE_EXPORT_MAX_BYTES.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from engram.account.models import ExportJob
from engram.agents.models import Agent, Workspace
from engram.aws import keys
from engram.connections.service import revoke_all as revoke_grants
from engram.conversations.models import summary_public
from engram.kernel.errors import NotFound, PayloadTooLarge, QueueUnavailable, error_of
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.streaming import closing as streaming

if TYPE_CHECKING:
    from engram.account.ports import AccountReads, AccountStores, ExportJobs, ExportObjects, ExportStores
    from engram.agents.ports import Agents, Workspaces
    from engram.kernel.ports import JobQueues
    from engram.kernel.settings import Settings

FORMAT_VERSION = 1
# Longer than HeartbeatFunction's timeout: a crashed worker's job is taken again on redelivery.
CLAIM_S = 900
# A queued or running job older than this is not "in progress" any more (its worker died).
STALE_AFTER = timedelta(hours=1)
RUN_PAGE = 10
PROGRESS_EVERY = 200  # records between progress writes (and at every uploaded part)

Record = tuple[str, dict[str, Any]]
# An archived message as exported: what was said, where and when (not its keys).
ARCHIVE_FIELDS = ("sessionId", "runId", "seq", "part", "role", "speaker", "text", "tools", "createdAt", "archivedAt")


def _pages[T](fetch: Callable[..., tuple[list[T], str | None]], size: int = 100) -> Iterator[T]:
    """Every item of a paged list, one page in memory at a time."""
    token: str | None = None
    while True:
        items, token = fetch(limit=size, token=token)
        yield from items
        if not token:
            return


def _all_agents(agents: Agents, tenant: str) -> Iterator[Agent]:
    return _pages(lambda **page: agents.page(tenant, **page))


def _all_workspaces(workspaces: Workspaces, tenant: str) -> Iterator[Workspace]:
    return _pages(lambda **page: workspaces.page(tenant, **page))


def records(deps: AccountReads, tenant: str) -> Iterator[Record]:
    """Everything stored for the caller (webhook secrets excluded), one typed record at a time:
    each agent followed by its sessions (each with its running summary, followed by its
    messages), its conversation archive (every message said, the ones the history cap cut
    included), memories, run memory and runs; then workspaces (each followed by its memories),
    facts, usage rows and totals, card types, tool connections (never their auth values), API keys
    (never their hashes); an agent's run timelines and kept full
    tool results follow its runs. tests/integration/test_export_complete.py compares it with
    every item and object stored for the caller."""
    for agent in _all_agents(deps.agents, tenant):
        yield "agent", agent.public()
        for session in _pages(lambda agent_id=agent.id, **page: deps.sessions.page(tenant, agent_id, **page)):
            yield "session", {**session.public(), "summary": summary_public(session.summary)}
            history = deps.history.load(tenant, agent.id, session.id, committed_run=session.last_run_id)
            for index, message in enumerate(history.messages):
                yield "message", {"agentId": agent.id, "sessionId": session.id, "index": index, "message": message}
        for item in deps.archive.agent_items(tenant, agent.id):
            yield "archive", {"agentId": agent.id, **{k: v for k, v in item.items() if k in ARCHIVE_FIELDS}}
        for memory in deps.memories.all(tenant, "agent", agent.id):
            yield "memory", {**memory.public(), "ownerId": agent.id}
        for run_id, entry in deps.run_memory.agent_entries(tenant, agent.id):
            yield "runMemory", {"agentId": agent.id, "runId": run_id, **entry.public()}
        # Run records are the big rows (prompt, result, tool calls: up to 400 KB each): small pages.
        for run in _pages(lambda agent_id=agent.id, **page: deps.runs.page(tenant, agent_id, **page), RUN_PAGE):
            yield "run", run.public()
        for trace in deps.runs.traces.agent_parts(tenant, agent.id):  # the runs' timelines (OB1)
            yield "trace", {"agentId": agent.id, **trace}
        for run_id, tool_use_id, result in deps.history.tool_results(tenant, agent.id):
            yield "toolResult", {"agentId": agent.id, "runId": run_id, "toolUseId": tool_use_id, "result": result}
    for ws in _all_workspaces(deps.workspaces, tenant):
        yield "workspace", ws.public()
        for memory in deps.memories.all(tenant, "workspace", ws.id):
            yield "memory", {**memory.public(), "ownerId": ws.id}
    yield from _account_rows(deps, tenant)


def _account_rows(deps: AccountReads, tenant: str) -> Iterator[Record]:
    """The rows of the account itself: facts, usage, card types, connections, API keys."""
    name = deps.profiles.name(tenant)
    if name is not None:
        yield "profile", {"name": name}
    for fact in deps.facts.all(tenant):
        yield "fact", fact.public()
    for row in _pages(lambda **page: deps.usage.page(tenant, agent_id=None, session_key=None, **page)):
        yield "usage", row.public()
    for total in deps.usage.all_totals(tenant):  # per day and month, the person's and each agent's; the limits
        yield "usageTotal", total
    for card_type in deps.card_types.all(tenant):
        yield "cardType", card_type.public()
    for connection in deps.connections.all(tenant):
        yield "connection", connection.public()  # never its auth value: the model does not hold it
    for api_key in deps.api_keys.all(tenant):
        yield "apiKey", api_key.public()  # never the key's hash: the model does not hold it


# --- the export job -------------------------------------------------------------------------------
def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _in_progress(job: ExportJob) -> bool:
    return job.status in ("queued", "running") and datetime.now(UTC) - _parse(job.updated_at) < STALE_AFTER


def start_export(exports: ExportJobs, queues: JobQueues, settings: Settings, tenant: str) -> ExportJob:
    """POST /api/me/export: a new job, or the one already in progress (one at a time)."""
    for job in exports.all(tenant):
        if _in_progress(job):
            return job
    now = now_iso()
    retention_s = settings.export_retention_days * 86400
    job = ExportJob(id=new_id("exp"), created_at=now, updated_at=now, expires_at=int(time.time()) + retention_s)
    exports.create(tenant, job)
    try:
        queues.enqueue_run({"kind": "export", "tenant": tenant, "exportId": job.id})
    except Exception:
        logger.exception("could not queue an export job", extra={"export_id": job.id})
        failed = _ended(job, "failed", error={"code": "queue_unavailable", "message": "the export could not be queued"})
        exports.finish(tenant, failed)
        raise QueueUnavailable("the export could not be queued; nothing was written, start it again") from None
    return job


def _ended(job: ExportJob, status: str, **changes: object) -> ExportJob:
    now = now_iso()
    return job.model_copy(update={"status": status, "finished_at": now, "updated_at": now, **changes})


def process_export_job(deps: ExportStores, message: Mapping[str, object]) -> None:
    """One export job from the run queue: streams `records` to the job's object as JSON Lines.
    A failure is recorded on the job (the caller starts another), not retried."""
    tenant, export_id = check_id("tenant", message.get("tenant")), check_id("exportId", message.get("exportId"))
    job = deps.exports.claim(tenant, export_id, claim_s=CLAIM_S)
    if job is None:
        logger.info("export already finished or running elsewhere; delivery ignored", extra={"export_id": export_id})
        return
    key = keys.export_object(tenant, export_id)
    writer = deps.export_objects.writer(key, part_bytes=deps.settings.export_part_bytes)
    counts: dict[str, int] = {}
    try:
        writer.write({"type": "export", "data": {"exportId": export_id, "version": FORMAT_VERSION, "exportedAt": now_iso()}})
        for written, (kind, record) in enumerate(records(deps, tenant), 1):
            uploaded = writer.write({"type": kind, "data": record})
            counts[kind] = counts.get(kind, 0) + 1
            if uploaded or written % PROGRESS_EVERY == 0:
                deps.exports.progress(tenant, export_id, counts=counts, size=writer.bytes, parts=writer.parts)
        # The last line says the file is whole (a truncated download lacks it).
        writer.write({"type": "end", "data": {"counts": counts}})
        writer.close()
    except Exception as err:
        logger.exception("export failed", extra={"export_id": export_id})
        writer.abort()
        deps.exports.finish(tenant, _ended(job, "failed", counts=counts, bytes=writer.bytes, error=error_of(err)))
        return
    done = _ended(job, "succeeded", counts=counts, bytes=writer.bytes, parts=writer.parts)
    if not deps.exports.finish(tenant, done):
        # The account was deleted while the export ran: its object must not outlive it.
        deps.export_objects.delete(key)


def export_status(
    exports: ExportJobs, objects: ExportObjects, settings: Settings, tenant: str, export_id: str
) -> dict[str, object]:
    """GET /api/me/export/{exportId}: the job, its progress, and when done a presigned URL."""
    job = exports.get(tenant, check_id("exportId", export_id))
    if job is None:
        raise NotFound("export not found", field="exportId")
    out = {**job.public(), "availableUntil": _iso(job.expires_at)}
    if job.status == "succeeded":
        ttl = settings.export_url_ttl_s
        out["downloadUrl"] = objects.download_url(
            keys.export_object(tenant, job.id), filename=f"engram-export-{job.id}.jsonl", expires_s=ttl
        )
        out["downloadUrlExpiresAt"] = _iso(int(time.time()) + ttl)
    return out


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the deprecated one-response export -------------------------------------------------------------
def inline_export(deps: AccountReads, tenant: str) -> dict[str, object]:
    """GET /api/me/export: the whole account in one JSON document, as before the export jobs;
    413 `export_too_large` once it passes INLINE_EXPORT_MAX_BYTES (measured as JSON Lines), so
    this route never holds more than that in memory."""
    budget = deps.settings.inline_export_max_bytes
    out: dict[str, Any] = {"exportedAt": now_iso(), "agents": [], "workspaces": []}
    out |= {"profile": {"name": None}, "facts": [], "runs": [], "usage": [], "usageTotals": []}
    out |= {"cardTypes": [], "connections": [], "apiKeys": []}
    owners: dict[str, dict[str, Any]] = {}
    sessions: dict[tuple[str, str], dict[str, Any]] = {}
    size = 0
    for kind, record in records(deps, tenant):
        size += len(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)) + 1
        if size > budget:
            raise PayloadTooLarge(
                f"the account is larger than {budget} bytes: POST /api/me/export writes it to a file instead",
                code="export_too_large",
            )
        if kind == "agent":
            owners[record["id"]] = {
                **record,
                "sessions": [],
                "archive": [],
                "memories": [],
                "runMemory": [],
                "toolResults": [],
                "traces": [],
            }
            out["agents"].append(owners[record["id"]])
        elif kind == "session":
            sessions[(record["agentId"], record["id"])] = {**record, "messages": []}
            owners[record["agentId"]]["sessions"].append(sessions[(record["agentId"], record["id"])])
        elif kind == "message":
            sessions[(record["agentId"], record["sessionId"])]["messages"].append(record["message"])
        elif kind == "archive":
            owners[record["agentId"]]["archive"].append({k: v for k, v in record.items() if k != "agentId"})
        elif kind == "memory":
            owners[record["ownerId"]]["memories"].append({k: v for k, v in record.items() if k != "ownerId"})
        elif kind == "runMemory":
            owners[record["agentId"]]["runMemory"].append({k: v for k, v in record.items() if k != "agentId"})
        elif kind == "trace":
            owners[record["agentId"]]["traces"].append({k: v for k, v in record.items() if k != "agentId"})
        elif kind == "toolResult":
            owners[record["agentId"]]["toolResults"].append({k: v for k, v in record.items() if k != "agentId"})
        elif kind == "profile":
            out["profile"] = record
        elif kind == "workspace":
            owners[record["id"]] = {**record, "memories": []}
            out["workspaces"].append(owners[record["id"]])
        else:
            out[
                {
                    "fact": "facts",
                    "run": "runs",
                    "usage": "usage",
                    "usageTotal": "usageTotals",
                    "cardType": "cardTypes",
                    "connection": "connections",
                    "apiKey": "apiKeys",
                }[kind]
            ].append(record)
    return out


def delete_everything(deps: AccountStores, tenant: str) -> dict[str, int]:
    """Removes every row and object of the caller: agents (sessions, transcripts, memories, runs),
    workspaces and their memory, facts, usage rows, export jobs and their files, API keys."""
    counts = {
        "agents": 0,
        "workspaces": 0,
        "facts": 0,
        "usageRows": 0,
        "transcripts": 0,
        "exports": 0,
        "connections": 0,
        "apiKeys": 0,
    }
    # The API keys first: nothing of the account is reachable with one while the rest goes.
    counts["apiKeys"] = deps.api_keys.delete_all(tenant)
    for agent in list(_all_agents(deps.agents, tenant)):
        if agent.schedule:
            deps.schedules.delete(agent.id)
        counts["transcripts"] += deps.history.delete_agent(tenant, agent.id)
        deps.agents.delete_cascade(tenant, agent.id)
        counts["agents"] += 1
    for ws in list(_all_workspaces(deps.workspaces, tenant)):
        deps.memories.delete_owner(tenant, "workspace", ws.id)
        deps.workspaces.delete(tenant, ws.id)
        counts["workspaces"] += 1
    counts["facts"] = deps.facts.delete_all(tenant)
    counts["usageRows"] = deps.usage.delete_all(tenant)
    # Rows first: an export finishing after this finds its row gone and deletes its own object.
    deps.exports.delete_all(tenant)
    counts["exports"] = deps.export_objects.delete_prefix(keys.export_prefix(tenant))
    # What is left in the tenant partition: custom card types, runs whose agent row was already gone.
    deps.card_types.delete_all(tenant)
    revoke_grants(deps, tenant)  # OAuth connections' grants end at their servers too (TL9)
    counts["connections"] = deps.connections.delete_all(tenant)
    opened = deps.streams.delete_all(tenant)  # open sockets and the turns they sent (ST2)
    if opened:  # the management API's client only when there is a socket to close
        streaming.close_all(deps.pusher, opened)
    deps.runs.delete_all(tenant)
    deps.agents.forget_quotas(tenant)
    return counts
