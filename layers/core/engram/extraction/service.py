"""Automatic memory extraction (EX1-EX5): after a run, one small-model pass distils at most five
durable facts into `auto:<slug>` memory rows. It runs from the extraction queue, never on the
turn's critical path; whatever happens here cannot fail, slow or change the turn.

One job, in order (AWS calls in brackets; `make bench` counts them):
  1. validate the job (a job that can never be processed raises: SQS retries it, then the DLQ);
  2. render the run's transcript from the job's messages (or, for a `truncated` job, from the
     session transcript in S3 [1 GET]); under 200 characters: skip; over 12,000: keep the END;
  3. read the agent [1 GetItem]; decide the target scopes (EX3); none: skip;
  4. in parallel: claim the run's marker [1 UpdateItem] and load up to 100 live rows per target
     scope [1 Query each];
  5. ONE model call, output forced through the `record_memories` tool, validated with pydantic;
  6. filter: confidence >= 0.6, scope rules, secrets, Jaccard dedup (> 0.8), supersede, at most 5;
  7. read the rows the kept keys would overwrite when they were not loaded [0-1 BatchGetItem];
  8. commit rows + superseded rows + the usage row + marker `done` in ONE transaction [1].

Which end of a long transcript is kept: the end. The last messages hold the run's conclusions and
the latest word on anything corrected during it (which decides what supersedes what); a job read
back from the session transcript has its own run at the end; and the beginning of a session was
already seen by the extraction jobs of the earlier turns. Each message is clipped first
(4,000 characters, head and tail) so one pasted document cannot push everything else out.

Cost bound (EX2, ~$0.03): the prompt is at most ~22,000 characters (12,000 transcript, 20 hints
of at most 200 characters, the instructions and the tool schema). Counting one token per character
(real text is ~4 characters a token) bounds the input at $1/M x 22k = $0.022 for Haiku 4.5;
`max_tokens` is what the rest of the budget buys at the output price, capped at 1,024 (five facts
need ~500): 1,024 x $5/M = $0.005, so one call costs at most ~$0.027. A pricier EXTRACT_MODEL
gets a smaller `max_tokens`, then a shorter transcript (still its end) and fewer hints; when not
even that can be afforded the job is skipped (`over_budget`) rather than overspend.

The pure parts live beside this module: `extraction.prompt` (steps 2 and 5: the transcript, the
request fitted to the budget, the answer read back) and `extraction.selection` (steps 6 and 8:
which candidates are kept, and the rows written for them). Here: the job's I/O and its order, one
`ExtractionRun` carried from the claim to the commit.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from engram.agents.models import Agent
from engram.engine import timeline
from engram.engine.pricing import prices_for, usage_of
from engram.extraction.models import AlreadyExtracted, Claim, ExtractionBusy, LeaseLost, RowsChanged, RowWrite
from engram.extraction.ports import ExtractionClaims
from engram.extraction.prompt import (
    EXTRACTION_TOOL,
    MIN_TRANSCRIPT_CHARS,
    cap_transcript,
    fit_request,
    parse_answer,
    render_transcript,
)
from engram.extraction.selection import choose, plan_writes
from engram.kernel.ids import ID_PATTERN
from engram.kernel.model import now_iso
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.secrets import secret_values
from engram.memory.models import Memory, memory_id
from engram.usage.models import Usage, UsageRow
from engram.usage.totals import emit_metrics

if TYPE_CHECKING:
    from engram.wiring.model import ModelDeps

HINT_ROWS = 20  # shown to the model as "do not repeat these"
LOADED_ROWS = 100  # compared by Jaccard
LEASE_MARGIN_S = 30
DEFAULT_LEASE_S = 120  # outside Lambda (tests, bench): no remaining time to go by
MIN_CALL_SECONDS = 3.0

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]


class InvalidJob(ValueError):
    """A job that can never be processed (not JSON, missing or invalid ids): SQS retries it, then parks it in the DLQ."""


class NoTimeLeft(RuntimeError):
    """Too little of the invocation is left for a model call: the job is retried."""


# --- the job and its outcome -----------------------------------------------------------------
class ExtractJob(BaseModel):
    """What `turns._enqueue_extraction` sends (and council runs will, with `chainId`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    run_id: Id = Field(alias="runId")
    tenant: Id
    agent_id: Id = Field(alias="agentId")
    session_id: Id = Field(alias="sessionId")
    workspace_id: Id | None = Field(None, alias="workspaceId")
    kind: str = "chat"
    chain_id: Id | None = Field(None, alias="chainId")
    messages: list[dict[str, Any]] | None = None
    truncated: bool = False

    @property
    def usage_key(self) -> str:
        """EX2: extraction cost is recorded under its own synthetic session id."""
        if self.chain_id:
            return f"memory-extract:chain:{self.chain_id[:8]}"
        return f"memory-extract:{self.session_id}"


@dataclass
class Outcome:
    """What a job did (returned for tests and the bench; the same goes to the log)."""

    status: Literal["stored", "nothing", "skipped", "malformed", "duplicate_job", "lease_lost"]
    reason: str | None = None
    kept: list[str] = field(default_factory=list)  # keys written
    superseded: list[str] = field(default_factory=list)  # ids archived as superseded
    dropped: Counter[str] = field(default_factory=Counter)
    usage: Usage | None = None
    transcript_chars: int = 0
    max_tokens: int | None = None


@dataclass(frozen=True)
class ExtractionRun:
    """One job once its run's marker is claimed: what every step from the model call to the commit reads."""

    job: ExtractJob
    agent: Agent
    targets: dict[str, str]  # scope -> owner id (EX3)
    claim: Claim
    transcript: str  # rendered and capped to its end
    rendered_chars: int  # before the cap
    rows: list[Future[list[Memory]]]  # the live rows of each target scope, being read
    remaining_s: float | None  # of the invocation, when it began
    log: dict[str, Any]
    started: float  # time.monotonic() when the job began

    def finish(self, outcome: Outcome) -> Outcome:
        return _finish(outcome, self.log, self.started)


# --- the job ----------------------------------------------------------------------------------
def _target_scopes(agent: Agent) -> dict[str, str]:
    """EX3: scope -> owner id. Workspace rows only when the agent has a workspace, agent rows only
    when its agentMemory is on."""
    targets: dict[str, str] = {}
    if agent.workspace_id:
        targets["workspace"] = agent.workspace_id
    if agent.agent_memory:
        targets["agent"] = agent.id
    return targets


def _count(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count) -> None:
    metrics.add_metric(name=name, unit=unit, value=value)


def _finish(outcome: Outcome, log: Mapping[str, object], started: float) -> Outcome:
    _count("ExtractWorkerLatency", (time.monotonic() - started) * 1000, MetricUnit.Milliseconds)
    if outcome.status in ("skipped", "duplicate_job"):
        _count("ExtractSkipped")
        _count(f"ExtractSkipped_{outcome.reason}")
    logger.info(
        "extraction finished",
        extra={
            **log,
            "status": outcome.status,
            "reason": outcome.reason,
            "kept": outcome.kept,
            "superseded": outcome.superseded,
            "dropped": dict(outcome.dropped),
            "transcript_chars": outcome.transcript_chars,
            "usage": outcome.usage.model_dump(by_alias=True) if outcome.usage else None,
        },
    )
    return outcome


def process_extraction_job(deps: ModelDeps, raw: object, *, remaining_s: float | None = None) -> Outcome:
    """One extraction job. Returns what it did; raises only when SQS should deliver it again
    (an invalid job, a model or AWS failure, a concurrent delivery, a row changed under it).
    Every failure is logged with the run id and counted."""
    started = time.monotonic()
    try:
        job = ExtractJob.model_validate(raw)
    except ValidationError as err:
        _count("ExtractJobInvalid")
        logger.error("invalid extraction job", extra={"errors": err.errors(include_url=False, include_input=False)[:5]})
        raise InvalidJob(f"invalid extraction job: {err.error_count()} error(s)") from None
    log = {"run_id": job.run_id, "agent_id": job.agent_id, "session_id": job.session_id}
    _count("ExtractJobs")
    try:
        with timeline.job("extraction", job.run_id, deps.runs, job.tenant, deps.settings) as span:  # OB1: under its turn
            outcome = _run(deps, job, remaining_s, log, started)
            span.set(engram__job__status=outcome.status, engram__job__reason=outcome.reason or None)
            timeline.job_trace_now().keep = outcome.status != "duplicate_job"  # the first delivery's part stands
            return outcome
    except ExtractionBusy:
        _count("ExtractBusy")
        logger.info("another delivery of this job is running; retried later", extra=log)
        raise
    except Exception as err:
        _count("ExtractFailed")
        logger.warning("extraction failed; the job will be retried", extra={**log, "error": f"{type(err).__name__}: {err}"})
        raise


def _run(deps: ModelDeps, job: ExtractJob, remaining_s: float | None, log: dict[str, Any], started: float) -> Outcome:
    messages = job.messages
    if messages is None:  # too big for the message (or an old job): the run ends the session's transcript
        session = deps.sessions.get(job.tenant, job.agent_id, job.session_id)
        committed = session.get("lastRunId") if session is not None else None
        messages = deps.history.load(job.tenant, job.agent_id, job.session_id, committed_run=committed).messages
    rendered = render_transcript(messages)
    if len(rendered) < MIN_TRANSCRIPT_CHARS:
        return _finish(Outcome("skipped", "short", transcript_chars=len(rendered)), log, started)
    transcript = cap_transcript(rendered)

    agent = deps.agents.get(job.tenant, job.agent_id)
    if agent is None:
        return _finish(Outcome("skipped", "agent_gone", transcript_chars=len(rendered)), log, started)
    targets = _target_scopes(agent)
    if not targets:
        return _finish(Outcome("skipped", "no_target", transcript_chars=len(rendered)), log, started)

    store = deps.extraction
    lease_s = (remaining_s if remaining_s is not None else DEFAULT_LEASE_S) + LEASE_MARGIN_S
    claim_future = deps.executor.submit(
        store.claim, job.tenant, job.agent_id, job.run_id, attempt_id=uuid.uuid4().hex, lease_s=lease_s
    )
    row_futures = [
        deps.executor.submit(store.live_rows, job.tenant, scope, owner, limit=LOADED_ROWS, session_id=job.session_id)
        for scope, owner in targets.items()
    ]
    try:
        claim = claim_future.result()
    except AlreadyExtracted as done:
        for f in row_futures:
            f.exception()  # let the reads finish before the container may freeze
        _count("ExtractRedelivered")
        return _finish(
            Outcome("duplicate_job", "already_extracted", transcript_chars=len(rendered)),
            log | {"marker": done.marker.get("outcome")},
            started,
        )
    except Exception:
        for f in row_futures:
            f.exception()
        raise

    run = ExtractionRun(job, agent, targets, claim, transcript, len(rendered), row_futures, remaining_s, log, started)
    try:
        return _extract(deps, run)
    except Exception:
        try:
            store.release(job.tenant, job.agent_id, job.run_id, claim)
        except Exception:
            logger.exception("could not release the extraction marker", extra=log)
        raise


def _extract(deps: ModelDeps, run: ExtractionRun) -> Outcome:
    settings, store, job, log = deps.settings, deps.extraction, run.job, run.log
    loaded: list[Memory] = [m for f in run.rows for m in f.result()]
    loaded.sort(key=lambda m: m.updated_at, reverse=True)
    loaded = loaded[:LOADED_ROWS]
    hints = loaded[:HINT_ROWS]
    scopes = ["workspace", "agent"] if "workspace" in run.targets else ["agent"]
    model = settings.extract_model
    outcome = Outcome("nothing", transcript_chars=run.rendered_chars)
    if prices_for(model) is None and getattr(deps.provider, "name", "") != "offline":
        logger.warning("EXTRACT_MODEL is not in the price table: its cost cannot be bounded", extra={**log, "model": model})
    fitted = fit_request(model, run.transcript, hints, scopes, settings.extract_budget_usd)
    if fitted is None:
        outcome.status, outcome.reason = "skipped", "over_budget"
        store.commit(
            job.tenant,
            job.agent_id,
            job.run_id,
            run.claim,
            outcome={"status": "skipped", "reason": "over_budget"},
            usage=None,
            rows=[],
            memory_limit=settings.max_memories_per_scope,
        )
        return run.finish(outcome)
    (system, tools, messages), max_tokens, sent_chars = fitted
    outcome.max_tokens = max_tokens
    if sent_chars < len(run.transcript):
        logger.info("transcript shortened to fit the extraction budget", extra={**log, "sent_chars": sent_chars, "model": model})

    timeout = settings.extract_timeout_s
    if run.remaining_s is not None:
        timeout = min(timeout, run.remaining_s - (time.monotonic() - run.started) - 2)
        if timeout < MIN_CALL_SECONDS:
            raise NoTimeLeft("too little time left in the invocation for the model call")
    with timeline.model_call(timeline.job_trace_now(), model=model, provider=deps.provider.name, max_tokens=max_tokens) as call:
        response = deps.provider.complete(
            model=model,
            system=system,
            tools=tools,
            messages=messages,
            max_tokens=max_tokens,
            timeout=timeout,
            tool_choice={"type": "tool", "name": EXTRACTION_TOOL},
        )
        usage = usage_of(response)
        call.answered(response, usage)
    outcome.usage = usage
    _count("ExtractInputTokens", usage.input_tokens)
    _count("ExtractOutputTokens", usage.output_tokens)
    _count("ExtractCostUsd", usage.cost_usd, MetricUnit.NoUnit)
    emit_metrics("extraction", run.agent.id, usage, per_agent=deps.settings.usage_metrics_per_agent)
    if usage.cost_usd > settings.extract_budget_usd:
        logger.warning("an extraction call cost more than its budget", extra={**log, "cost_usd": usage.cost_usd})
    now = now_iso()
    usage_row = UsageRow(
        id=f"{job.run_id}-x{run.claim.attempt}",
        created_at=now,
        agent_id=run.agent.id,
        session_key=job.usage_key,
        run_id=job.run_id,
        model=response.model,
        **usage.model_dump(),
    )
    memory_limit = settings.max_memories_per_scope

    answer = parse_answer(response.content)
    if answer is None:
        # Writes nothing; the call is paid for and recorded; not retried (the same prompt would
        # most likely fail the same way).
        _count("ExtractMalformed")
        outcome.status, outcome.reason = "malformed", "invalid_tool_answer"
        logger.warning("the extraction answer did not match the schema", extra={**log, "stop_reason": response.stop_reason})
        _commit(store, run, usage_row, [], {"status": "malformed"}, outcome, memory_limit=memory_limit)
        return run.finish(outcome)

    pending, dropped = choose(
        answer.facts,
        targets=run.targets,
        loaded=loaded,
        value_max_chars=settings.memory_value_max_chars,
        transcript_secrets=secret_values(run.transcript) if answer.facts else None,
    )
    known = {m.id: m for m in loaded}
    unknown = [(p.scope, p.owner_id, memory_id(p.scope, p.owner_id, p.key)) for p in pending]
    unknown = [w for w in unknown if w[2] not in known]
    stored = {**known, **store.get_rows(job.tenant, unknown)}
    origin = {"runId": job.run_id, "sessionId": job.session_id, "agentId": run.agent.id, "source": "extraction"}
    writes, kept, superseded, more_dropped = plan_writes(pending, stored=stored, targets=run.targets, origin=origin, now=now)
    dropped.update(more_dropped)
    outcome.kept, outcome.superseded, outcome.dropped = kept, superseded, dropped
    outcome.status = "stored" if kept else "nothing"
    marker = {"status": outcome.status, "kept": len(kept), "superseded": len(superseded)}
    _commit(store, run, usage_row, writes, marker, outcome, memory_limit=memory_limit)
    _count("ExtractFactsKept", len(kept))
    _count("ExtractSuperseded", len(superseded))
    _count("ExtractFactsDropped", sum(dropped.values()))
    for reason, n in dropped.items():
        _count(f"ExtractFactsDropped_{reason}", n)
    return run.finish(outcome)


def _commit(
    store: ExtractionClaims,
    run: ExtractionRun,
    usage_row: UsageRow,
    writes: list[RowWrite],
    marker: dict[str, Any],
    outcome: Outcome,
    *,
    memory_limit: int,
) -> None:
    job = run.job
    try:
        left_out = store.commit(
            job.tenant,
            job.agent_id,
            job.run_id,
            run.claim,
            outcome=marker,
            usage=usage_row,
            rows=writes,
            memory_limit=memory_limit,
        )
        if left_out:
            # A full memory quota stores less; the run and the job still succeed.
            logger.warning(
                "memory quota reached: extracted rows left out",
                extra={"run_id": job.run_id, "left_out": len(left_out), "limit": memory_limit},
            )
            dropped_keys = {row.memory.key for row in left_out}
            outcome.kept = [key for key in outcome.kept if key not in dropped_keys]
            outcome.dropped["quota"] += len(left_out)
    except LeaseLost:
        # Another delivery took over (this one outlived its lease): it commits; we only record our call.
        _record_usage_alone(store, job, usage_row)
        outcome.status, outcome.reason, outcome.kept, outcome.superseded = "lease_lost", "lease_lost", [], []
    except RowsChanged:
        _record_usage_alone(store, job, usage_row)
        raise


def _record_usage_alone(store: ExtractionClaims, job: ExtractJob, usage_row: UsageRow) -> None:
    try:
        store.put_usage(job.tenant, usage_row)
    except Exception:
        logger.exception("could not record the usage of an extraction call", extra={"run_id": job.run_id})
