"""Runs started from the API (manual runs, re-examinations), their memory and lifetime, and the
Active Memory panel. The runs themselves execute in the `heartbeat` function."""

from __future__ import annotations

from typing import Annotated, get_args

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.agents.service import get_agent
from engram.api.http import PAGE, Deps, Limit, Reply, SearchText, Tenant, Token, listed, ok
from engram.kernel.ids import check_id
from engram.kernel.textsearch import text_query
from engram.runs import active_memory
from engram.runs import service as run_records
from engram.runs.models import Run, RunCreate, RunKind, RunStatus, RunUpdate
from engram.runs.search import RunFilter, search_runs

router = Router()

_KIND = "|".join(get_args(RunKind))
# awaiting_approval: a run stopped for a person's approval of a tool call (DESIGN 9, TL10)
_STATUS = "|".join(get_args(RunStatus))
KindFilter = Annotated[str | None, Query(pattern=rf"^({_KIND})(,({_KIND}))*$", max_length=200)]
StatusFilter = Annotated[str | None, Query(pattern=rf"^({_STATUS})(,({_STATUS}))*$", max_length=200)]
# A day (the whole day) or a time, UTC.
When = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?Z?)?$")]


def _runs(deps: Deps, tenant: str, wanted: RunFilter, limit: int, token: str | None) -> Reply:
    if wanted.agent_id is not None:
        get_agent(deps.agents, tenant, check_id("agentId", wanted.agent_id))
    return ok(search_runs(deps.runs, tenant, wanted, limit=limit, token=token))


def _whole_day(until: str | None) -> str | None:
    return until + "~" if until and "T" not in until else until  # "~" sorts after the day's times


@router.get("/api/runs")
def list_all_runs(
    deps: Deps,
    tenant: Tenant,
    agentId: str | None = None,
    kind: KindFilter = None,
    status: StatusFilter = None,
    since: When = None,
    until: When = None,
    q: SearchText = None,
    councilRunId: str | None = None,
    limit: Limit = PAGE,
    nextToken: Token = None,
) -> Reply:
    since_lead = None
    if councilRunId is not None:  # its members were created after it: the read stops there
        since_lead = run_records.get_run(deps.runs, tenant, check_id("councilRunId", councilRunId)).created_at
    wanted = RunFilter(
        agent_id=agentId,
        kinds=listed(kind),
        statuses=listed(status),
        since=max(filter(None, (since, since_lead)), default=None),
        until=_whole_day(until),
        query=text_query(q),
        council_run_id=councilRunId,
    )
    return _runs(deps, tenant, wanted, limit, nextToken)


def _accepted(run: Run) -> Reply:
    return ok(
        {"runId": run.id, "agentId": run.agent_id, "kind": run.kind, "status": run.status, "parentRunId": run.parent_run_id}, 202
    )


@router.post("/api/agents/<agentId>/runs")
def create_run(deps: Deps, tenant: Tenant, agentId: str, body: RunCreate) -> Reply:
    return _accepted(run_records.start_manual_run(deps, tenant, agentId, body))


@router.get("/api/agents/<agentId>/active-memory")
def get_active_memory(deps: Deps, tenant: Tenant, agentId: str) -> Reply:
    return ok(active_memory.status(deps, tenant, agentId).public())


@router.post("/api/agents/<agentId>/active-memory/reset")
def reset_active_memory(deps: Deps, tenant: Tenant, agentId: str) -> Reply:
    return ok(active_memory.reset(deps, tenant, agentId).public())


@router.patch("/api/runs/<runId>")
def update_run(deps: Deps, tenant: Tenant, runId: str, body: RunUpdate) -> Reply:
    return ok(run_records.update_run(deps.runs, deps.run_decisions, tenant, runId, body).public())


@router.post("/api/runs/<runId>/re-examine")
def reexamine_run(deps: Deps, tenant: Tenant, runId: str) -> Reply:
    return _accepted(run_records.start_reexamination(deps, tenant, runId))


@router.get("/api/runs/<runId>/re-examinations")
def list_reexaminations(deps: Deps, tenant: Tenant, runId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(run_records.list_reexaminations(deps.runs, deps.run_decisions, tenant, runId, limit, nextToken))


@router.get("/api/runs/<runId>/memory")
def get_run_memory(deps: Deps, tenant: Tenant, runId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(run_records.run_memory(deps.runs, deps.run_memory, tenant, runId, limit, nextToken))


@router.get("/api/agents/<agentId>/runs")
def list_runs(
    deps: Deps,
    tenant: Tenant,
    agentId: str,
    limit: Limit = PAGE,
    nextToken: Token = None,
    q: SearchText = None,
    kind: KindFilter = None,
    status: StatusFilter = None,
) -> Reply:
    if q or kind or status:  # filtered: read and kept as GET /api/runs does
        wanted = RunFilter(agent_id=agentId, kinds=listed(kind), statuses=listed(status), query=text_query(q))
        return _runs(deps, tenant, wanted, limit, nextToken)
    return ok(run_records.list_runs(deps.runs, deps.agents, tenant, agentId, limit, nextToken))


@router.get("/api/runs/<runId>")
def get_run(deps: Deps, tenant: Tenant, runId: str) -> Reply:
    return ok(run_records.get_run(deps.runs, tenant, runId).public())


@router.get("/api/runs/<runId>/tool-results/<toolUseId>")
def get_tool_result(deps: Deps, tenant: Tenant, runId: str, toolUseId: str) -> Reply:
    return ok(run_records.get_tool_result(deps.runs, deps.history, tenant, runId, toolUseId))


@router.get("/api/runs/<runId>/trace")
def get_run_trace(deps: Deps, tenant: Tenant, runId: str) -> Reply:
    return ok(run_records.get_trace(deps.runs, tenant, runId))
