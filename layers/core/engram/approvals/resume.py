"""TL10: a paused turn resumed by its worker (the chat function for a chat turn, the heartbeat
function for a run), once every held call is decided (approvals.service)."""

from __future__ import annotations

from engram.approvals.models import ResumeJob
from engram.approvals.service import release_session, undecided
from engram.conversations.chat import chat_plan
from engram.engine.plan import PausedTurn
from engram.engine.turn import TurnPlan, run_turn
from engram.kernel.errors import NotFound, TurnFailed, error_of
from engram.kernel.ids import check_id
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.recall.policy import TOKEN_NAME
from engram.runs.council_wait import member_settled, settle
from engram.runs.execution import execute_run, finish_run, resume_plan
from engram.runs.models import Run
from engram.wiring.model import ModelDeps

_CLAIM_MARGIN_S = 60.0


def process_resume_job(deps: ModelDeps, job: ResumeJob) -> str:
    """One resume job (turn queue or run queue): the resumption is claimed (a redelivery finds it
    claimed and does nothing), the turn goes on and commits. Returns what happened."""
    tenant, run_id = check_id("tenant", job.tenant), check_id("runId", job.run_id)
    run = deps.runs.get(tenant, run_id)
    if run is not None and run.status == "awaiting_approval" and run.waiting_for:
        return continue_council(deps, tenant, run)
    if run is None or run.status != "awaiting_approval" or run.paused is None or undecided(run):
        logger.info("resume job for a run not ready to resume; ignored", extra={"run_id": run_id})
        return "ignored"
    budget = deps.settings.async_turn_budget_s if run.kind == "chat" else deps.settings.run_budget_s
    claimed = deps.runs.start(tenant, run_id, claim_s=2 * budget + _CLAIM_MARGIN_S, waiting=True)
    if claimed is None:
        logger.info("resumption claimed by another delivery; ignored", extra={"run_id": run_id})
        return "duplicate"
    status = _resume(deps, tenant, claimed)
    if claimed.kind == "council_member":  # its lead goes on once no member waits
        member_settled(deps, tenant, claimed)
    return status


def continue_council(deps: ModelDeps, tenant: str, lead: Run) -> str:
    """A council's lead whose members waited for approvals (runs.council_wait): once none waits, it
    is claimed once and goes on with their results from run memory."""
    if not settle(deps, tenant, lead):
        logger.info("a council's continuation while a member still waits; ignored", extra={"run_id": lead.id})
        return "waiting"
    return str(execute_run(deps, tenant, lead.id, continued=True)["status"])


def _resume(deps: ModelDeps, tenant: str, claimed: Run) -> str:
    run_id = claimed.id
    paused = PausedTurn.model_validate(claimed.paused or {})
    try:
        agent = deps.agents.get(tenant, claimed.agent_id)
        if agent is None:
            raise NotFound("agent not found", field="agentId")
        plan = (
            _chat_plan(deps, tenant, claimed, paused)
            if claimed.kind == "chat"
            else resume_plan(deps, tenant, claimed, agent, paused)
        )
        plan.agent = plan.agent or agent  # a council's member keeps its blind copy
        outcome = run_turn(deps, tenant, paused.message, plan)
    except TurnFailed as err:
        if err.run_id is None:
            _give_up(deps, tenant, claimed, err)
        return "failed"
    except Exception as err:  # before the turn ran (agent gone, session busy): recorded, the session freed
        logger.warning("a paused turn could not resume", extra={"run_id": run_id, "error": repr(err)})
        _give_up(deps, tenant, claimed, err)
        return "failed"
    if claimed.kind != "chat":
        finish_run(deps, tenant, claimed, outcome)
    return outcome.run.status


def _chat_plan(deps: ModelDeps, tenant: str, run: Run, paused: PausedTurn) -> TurnPlan:
    extra = dict(paused.plan.get("resumeData") or {})
    plan = chat_plan(
        deps,
        run.agent_id,
        run.session_id or "",
        run_id=run.id,
        budget_s=deps.settings.async_turn_budget_s,
        wait_s=deps.settings.session_wait_s,
        trigger=run.trigger,
        created_at=run.created_at,
    )
    if isinstance(extra.get("personName"), str):
        TOKEN_NAME.put(plan.tool_state, extra["personName"])
    plan.resume_data, plan.resume, plan.approvals = extra, paused, run.pending_approvals
    plan.events = deps.watchers(tenant, run.agent_id, run.session_id or "", run.id)
    return plan


def _give_up(deps: ModelDeps, tenant: str, run: Run, err: Exception) -> None:
    at = now_iso()
    failed = run.model_copy(
        update={"status": "failed", "updated_at": at, "finished_at": at, "error": error_of(err), "paused": None}
    )
    try:
        deps.runs.fail_unfinished(tenant, failed)
    finally:
        release_session(deps.sessions, tenant, run)
