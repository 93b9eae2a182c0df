"""Council runs (RM3): a lead's specialists run first, in parallel and blind; each result lands in
the run's memory under `task:<agentId>`, and the lead's message names those keys."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engram.agents.models import Agent
from engram.cards.policy import CardPolicy
from engram.engine.turn import TurnPlan, TurnPolicy, run_turn
from engram.kernel.errors import NotFound, TurnFailed, error_of
from engram.kernel.fencing import fence, inline, quote, token
from engram.kernel.observability import logger
from engram.recall.policy import ArchivePolicy
from engram.run_memory.store import RUN_MEMORY, RUN_MEMORY_GUIDE, RunScratchpad, task_key
from engram.runs.models import Run
from engram.wiring.model import ModelDeps

_ROSTER_PERSONA_CHARS = 120


def team_roster(members: list[tuple[str, str, str | None]]) -> str:
    """`## Your team`: each specialist's run memory key and title (name and persona line, stored
    text: quoted inside a fence)."""
    lines = [
        "## Your team",
        "You lead a council. Before this message, your specialists worked on the task independently; each",
        "result is in this run's memory under the key shown (read it with memory_read). Reconcile their views and",
        "decide. You may keep a durable insight about running this council for your next runs with store_learning.",
    ]
    return "\n".join(lines) + "\n" + fence("team", [f"- {token(key)}: {quote(title)}" for key, title, _ in members])


def run_council(
    deps: ModelDeps, tenant: str, lead_run: Run, lead: Agent, memory: RunScratchpad, task: str
) -> list[tuple[str, str, str | None]]:
    """Runs the specialists in parallel (RM3); each result lands under task:<agentId>, a failed one
    as failed. Returns (key, title, reply) per member, in team order."""
    with ThreadPoolExecutor(max_workers=max(1, len(lead.team)), thread_name_prefix="engram-council") as pool:
        futures = [pool.submit(_run_member, deps, tenant, lead_run, lead, member_id, memory, task) for member_id in lead.team]
        return [f.result() for f in futures]


def _member_message(lead: Agent, task: str) -> str:
    return (
        f"{task}\n\nYou are a specialist on a council led by {inline(lead.name)}. Work on this independently and give your own "
        "view; your reply (and your result card, if you have one) is handed to the lead."
    )


def _run_member(
    deps: ModelDeps, tenant: str, lead_run: Run, lead: Agent, member_id: str, memory: RunScratchpad, task: str
) -> tuple[str, str, str | None]:
    key = task_key(member_id)
    member = None
    try:
        member = deps.agents.get(tenant, member_id)
        if member is None:
            raise NotFound(f"team member {member_id} not found", field="team")
        persona = (member.persona or "").strip().splitlines()[0][:_ROSTER_PERSONA_CHARS] if member.persona else ""
        title = f"{member.name}" + (f" ({persona})" if persona else "")
        # Blind: no prior decisions (reviewDecisions off for this run), no shared session.
        blind = member.model_copy(update={"review_decisions": False})
        # The chain is extracted once, after the lead's turn: no extraction of a member on its own.
        policies: list[TurnPolicy] = [CardPolicy(deps), ArchivePolicy(deps.archive)]
        plan = TurnPlan(
            session_id=None,
            budget_s=deps.settings.run_budget_s,
            agent=blind,
            system_blocks=[RUN_MEMORY_GUIDE],
            tool_state={RUN_MEMORY: memory},
            policies=policies,
            run_fields={"kind": "council_member", "trigger": "council", "council_run_id": lead_run.id},
            pausable=False,  # TL10: the council does not wait for a member's approval yet
        )
        result = run_turn(deps, tenant, _member_message(lead, task), plan)
        value: dict[str, Any] = {"status": "succeeded", "runId": result.run.id, "reply": result.reply}
        if isinstance(result.run.result, dict) and result.run.result.get("card") is not None:
            value["card"] = result.run.result["card"]
            value["cardType"] = result.run.result.get("cardType")
        memory.set(key, "task_result", value, source=member.id, title=title, description=f"{member.name}'s result")
        return key, title, result.reply
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
        return key, title, None
