"""A council waits for its members (TL10): a member whose turn pauses for its owner's approval
leaves `{status: awaiting_approval, runId}` under its `task:<agentId>` key, and the lead's run
becomes `awaiting_approval` with `waitingFor` (the member runs), holding no Lambda and no lease.

When a member's resumed turn ends (approved, denied or expired), its worker settles the lead: each
waiting member whose run has finished gets its result written into the lead's run memory, and once
none waits the lead's continuation (a resume job on the run queue) is sent. The lead's worker
settles again and claims the continuation with one conditional write (awaiting_approval ->
running), so a redelivered job does nothing; the lead then reads its members' results from run
memory (runs.council.members_of) and its own turn runs. Whoever writes last sends the job: the
lead settles right after it starts waiting (a member may have finished meanwhile), and the sweeper
settles a waiting lead again past its stale time (a lost job, a member that crashed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.run_memory.models import RunMemoryEntry
from engram.run_memory.store import RunScratchpad
from engram.runs.models import ResumeJob, Run

if TYPE_CHECKING:
    from engram.kernel.ports import JobQueues
    from engram.kernel.settings import Settings
    from engram.run_memory.ports import RunMemories
    from engram.runs.ports import Runs

_UNFINISHED = ("queued", "running", "awaiting_approval")


class CouncilDeps(Protocol):
    """What settling a waiting council reads and writes: the runs, the lead's run memory (and the
    settings that bound it), the run queue its continuation goes on."""

    @property
    def runs(self) -> Runs: ...
    @property
    def run_memory(self) -> RunMemories: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def queues(self) -> JobQueues: ...


def member_value(run: Run, reply: str | None) -> dict[str, object]:
    """What the lead's run memory keeps of a member's run under task:<agentId>."""
    if run.status == "failed":
        return {"status": "failed", "runId": run.id, "error": run.error}
    if run.status == "awaiting_approval":  # the lead waits for it
        return {"status": "awaiting_approval", "runId": run.id}
    value: dict[str, object] = {"status": "succeeded", "runId": run.id, "reply": reply}
    if isinstance(run.result, dict) and run.result.get("card") is not None:
        value["card"] = run.result["card"]
        value["cardType"] = run.result.get("cardType")
    return value


def lead_waits(deps: CouncilDeps, tenant: str, run: Run, waiting: list[str]) -> str:
    """The lead's run waits for the member runs `waiting` (its worker returns); if they have all
    finished already, its continuation is sent at once."""
    waits = run.model_copy(update={"status": "awaiting_approval", "waiting_for": waiting, "updated_at": now_iso()})
    deps.runs.put(tenant, waits)
    metrics.add_metric(name="CouncilWaiting", unit=MetricUnit.Count, value=1)
    if settle(deps, tenant, waits):
        send_continuation(deps.queues, tenant, waits)
    return "awaiting_approval"


def member_settled(deps: CouncilDeps, tenant: str, member: Run) -> None:
    """A member's resumed turn ended, failed, or paused again (`settle` sees which from its record,
    or its absence): its lead goes on if no member waits."""
    if not member.council_run_id:
        return
    lead = deps.runs.get(tenant, member.council_run_id)
    if lead is not None and lead.status == "awaiting_approval" and settle(deps, tenant, lead):
        send_continuation(deps.queues, tenant, lead)


def settle(deps: CouncilDeps, tenant: str, lead: Run) -> bool:
    """Writes the result of each waiting member whose run has finished into the lead's run memory;
    True when no member waits any more."""
    memory = RunScratchpad.load(deps.run_memory, tenant, lead.agent_id, lead.id, deps.settings)
    settled = True
    for entry in memory.list(kind="task_result"):
        value = entry.value if isinstance(entry.value, dict) else {}
        if value.get("status") != "awaiting_approval":
            continue
        member = deps.runs.get(tenant, str(value.get("runId") or ""))
        if member is not None and member.status in _UNFINISHED:
            settled = False
            continue
        _record(memory, entry, member, str(value.get("runId") or ""))
    return settled


def _record(memory: RunScratchpad, entry: RunMemoryEntry, member: Run | None, run_id: str) -> None:
    if member is None:
        value: dict[str, object] = {
            "status": "failed",
            "runId": run_id,
            "error": {"code": "not_found", "message": "the member's run is gone"},
        }
    else:
        reply = member.result.get("reply") if isinstance(member.result, dict) else None
        value = member_value(member, reply if isinstance(reply, str) else None)
    failed = value["status"] == "failed"
    title = (entry.title or entry.key) + (" (FAILED)" if failed else "")
    description = "this specialist failed; see error" if failed else entry.description
    memory.set(entry.key, "task_result", value, source=entry.source, title=title, description=description)


def sweep_council(deps: CouncilDeps, tenant: str, lead: Run) -> bool:
    """The sweeper's look at a waiting lead past its stale time (approvals.service.sweep_approvals):
    its continuation is sent again once no member waits. True when it was sent."""
    return settle(deps, tenant, lead) and send_continuation(deps.queues, tenant, lead)


def send_continuation(queues: JobQueues, tenant: str, lead: Run) -> bool:
    """The lead's continuation on the run queue; a failure is logged (the sweeper sends it again)."""
    try:
        queues.enqueue_run(ResumeJob(tenant=tenant, run_id=lead.id).body())
    except Exception:
        logger.warning("could not send a council's continuation; the sweeper sends it again", extra={"run_id": lead.id})
        return False
    return True
