"""Runs started from the API (manual runs, re-examinations), their memory and lifetime, and the
Active Memory panel. The runs themselves execute in the `heartbeat` function."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from engram.api.http import PAGE, Limit, Reply, Token, deps_of, ok, tenant_of
from engram.runs import active_memory
from engram.runs import service as run_records
from engram.runs.models import Run, RunCreate, RunUpdate

router = Router()


def _accepted(run: Run) -> Reply:
    return ok(
        {"runId": run.id, "agentId": run.agent_id, "kind": run.kind, "status": run.status, "parentRunId": run.parent_run_id}, 202
    )


@router.post("/api/agents/<agentId>/runs")
def create_run(agentId: str, body: RunCreate) -> Reply:
    return _accepted(run_records.start_manual_run(deps_of(router), tenant_of(router), agentId, body))


@router.get("/api/agents/<agentId>/active-memory")
def get_active_memory(agentId: str) -> Reply:
    return ok(active_memory.status(deps_of(router), tenant_of(router), agentId).public())


@router.post("/api/agents/<agentId>/active-memory/reset")
def reset_active_memory(agentId: str) -> Reply:
    return ok(active_memory.reset(deps_of(router), tenant_of(router), agentId).public())


@router.patch("/api/runs/<runId>")
def update_run(runId: str, body: RunUpdate) -> Reply:
    return ok(run_records.update_run(deps_of(router), tenant_of(router), runId, body).public())


@router.post("/api/runs/<runId>/re-examine")
def reexamine_run(runId: str) -> Reply:
    return _accepted(run_records.start_reexamination(deps_of(router), tenant_of(router), runId))


@router.get("/api/runs/<runId>/re-examinations")
def list_reexaminations(runId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(run_records.list_reexaminations(deps_of(router), tenant_of(router), runId, limit, nextToken))


@router.get("/api/runs/<runId>/memory")
def get_run_memory(runId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(run_records.run_memory(deps_of(router), tenant_of(router), runId, limit, nextToken))


@router.get("/api/agents/<agentId>/runs")
def list_runs(agentId: str, limit: Limit = PAGE, nextToken: Token = None) -> Reply:
    return ok(run_records.list_runs(deps_of(router), tenant_of(router), agentId, limit, nextToken))


@router.get("/api/runs/<runId>")
def get_run(runId: str) -> Reply:
    return ok(run_records.get_run(deps_of(router), tenant_of(router), runId).public())


@router.get("/api/runs/<runId>/tool-results/<toolUseId>")
def get_tool_result(runId: str, toolUseId: str) -> Reply:
    return ok(run_records.get_tool_result(deps_of(router), tenant_of(router), runId, toolUseId))
