"""Council runs (RM3): a lead's specialists run first, in parallel and blind; each result lands in
the run's memory under `task:<agentId>`, and the lead's message names those keys."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from engram.agents.models import Agent
from engram.cards.policy import CardPolicy
from engram.engine.plan import PausedTurn
from engram.engine.turn import TurnPlan, TurnPolicy, run_turn
from engram.kernel.errors import NotFound, TurnFailed, error_of
from engram.kernel.fencing import fence, inline, quote, token
from engram.kernel.observability import logger
from engram.recall.policy import ArchivePolicy
from engram.run_memory.store import RUN_MEMORY, RUN_MEMORY_GUIDE, RunScratchpad, task_key
from engram.runs.council_wait import member_value
from engram.runs.models import Run
from engram.runs.notice import ApprovalNotice
from engram.wiring.model import ModelDeps

_ROSTER_PERSONA_CHARS = 120


class Member(NamedTuple):
    """A specialist's part of a council: its run memory key, title and reply (None: it failed or
    waits), and the run id of a member that waits for its owner's approval (TL10)."""

    key: str
    title: str
    reply: str | None
    waiting: str | None = None


def team_roster(members: list[Member]) -> str:
    """`## Your team`: each specialist's run memory key and title (name and persona line, stored
    text: quoted inside a fence)."""
    lines = [
        "## Your team",
        "You lead a council. Before this message, your specialists worked on the task independently; each",
        "result is in this run's memory under the key shown (read it with memory_read). Reconcile their views and",
        "decide. You may keep a durable insight about running this council for your next runs with store_learning.",
    ]
    return "\n".join(lines) + "\n" + fence("team", [f"- {token(m.key)}: {quote(m.title)}" for m in members])


def run_council(deps: ModelDeps, tenant: str, lead_run: Run, lead: Agent, memory: RunScratchpad, task: str) -> list[Member]:
    """Runs the specialists in parallel (RM3); each result lands under task:<agentId>, a failed one
    as failed, one paused for its owner's approval (TL10) as awaiting_approval with its run id.
    Returns the members in team order."""
    with ThreadPoolExecutor(max_workers=max(1, len(lead.team)), thread_name_prefix="engram-council") as pool:
        futures = [pool.submit(_run_member, deps, tenant, lead_run, lead, member_id, memory, task) for member_id in lead.team]
        return [f.result() for f in futures]


def _member_message(lead: Agent, task: str) -> str:
    return (
        f"{task}\n\nYou are a specialist on a council led by {inline(lead.name)}. Work on this independently and give your own "
        "view; your reply (and your result card, if you have one) is handed to the lead."
    )


def member_plan(
    deps: ModelDeps, member: Agent, lead_run_id: str, lead_id: str, memory: RunScratchpad, paused: PausedTurn | None = None
) -> TurnPlan:
    """A member's turn: blind (no prior decisions), no session, the lead's run memory. It pauses for
    its owner's approval like any run (TL10); `resume_data` finds the lead's run memory again."""
    blind = member.model_copy(update={"review_decisions": False})
    # The chain is extracted once, after the lead's turn: no extraction of a member on its own.
    policies: list[TurnPolicy] = [
        CardPolicy(deps.card_types),
        ArchivePolicy(deps.archive),
        ApprovalNotice(deps.settings.approval_topic_arn),
    ]
    stored = paused.plan if paused is not None else {}
    return TurnPlan(
        session_id=None,
        budget_s=deps.settings.run_budget_s,
        agent=blind,
        system_blocks=list(stored.get("systemBlocks") or [RUN_MEMORY_GUIDE]),
        tool_state={RUN_MEMORY: memory},
        policies=policies,
        run_fields=dict(
            stored.get("runFields") or {"kind": "council_member", "trigger": "council", "council_run_id": lead_run_id}
        ),
        resume_data={"councilRunId": lead_run_id, "leadAgentId": lead_id},
        resume=paused,
    )


def _run_member(
    deps: ModelDeps, tenant: str, lead_run: Run, lead: Agent, member_id: str, memory: RunScratchpad, task: str
) -> Member:
    key = task_key(member_id)
    member = None
    try:
        member = deps.agents.get(tenant, member_id)
        if member is None:
            raise NotFound(f"team member {member_id} not found", field="team")
        persona = (member.persona or "").strip().splitlines()[0][:_ROSTER_PERSONA_CHARS] if member.persona else ""
        title = f"{member.name}" + (f" ({persona})" if persona else "")
        result = run_turn(deps, tenant, _member_message(lead, task), member_plan(deps, member, lead_run.id, lead.id, memory))
        value = member_value(result.run, result.reply)
        waiting = result.run.id if value["status"] == "awaiting_approval" else None
        memory.set(key, "task_result", value, source=member.id, title=title, description=f"{member.name}'s result")
        return Member(key, title, None if waiting else result.reply, waiting)
    except Exception as err:
        error = error_of(err)
        logger.warning(
            "a council member failed; the lead still runs", extra={"run_id": lead_run.id, "member": member_id, "error": error}
        )
        value = {"status": "failed", "error": error}
        if isinstance(err, TurnFailed):
            value["runId"] = err.run_id
        title = f"{member.name if member else member_id} (FAILED)"
        memory.set(key, "task_result", value, source=member_id, title=title, description="this specialist failed; see error")
        return Member(key, title, None)


def resume_member_plan(deps: ModelDeps, tenant: str, run: Run, member: Agent, paused: PausedTurn) -> TurnPlan:
    """The plan of a member that paused for its owner's approval (TL10), built again: its turn goes
    on in the run-queue worker with the lead's run memory."""
    extra = paused.plan.get("resumeData") or {}
    lead_run_id, lead_id = str(extra.get("councilRunId") or run.council_run_id), str(extra.get("leadAgentId") or "")
    memory = RunScratchpad.load(deps.run_memory, tenant, lead_id, lead_run_id, deps.settings)
    plan = member_plan(deps, member, lead_run_id, lead_id, memory, paused)
    plan.run_id, plan.approvals = run.id, run.pending_approvals
    plan.run_fields.setdefault("created_at", run.created_at)
    return plan


def members_of(memory: RunScratchpad, team: list[str]) -> list[Member]:
    """A waiting lead's members as its run memory holds them once every one has finished (TL10):
    nobody is run again. In team order (a member no longer on the team last)."""
    entries = memory.list(kind="task_result")
    order = {task_key(member_id): i for i, member_id in enumerate(team)}
    members = []
    for entry in sorted(entries, key=lambda e: order.get(e.key, len(order))):
        value = entry.value if isinstance(entry.value, dict) else {}
        reply = value.get("reply") if value.get("status") == "succeeded" else None
        members.append(Member(entry.key, entry.title or entry.key, reply if isinstance(reply, str) else None))
    return members
