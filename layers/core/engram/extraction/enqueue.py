"""After a turn is committed, its transcript goes to the extraction queue (best-effort: extraction
must never fail or change a turn)."""

from __future__ import annotations

import json
from typing import Any

from engram.engine.tools import ToolContext
from engram.engine.turn import TurnOutcome, TurnPolicy
from engram.kernel.observability import MetricUnit, logger, metrics
from engram.kernel.ports import JobQueues

_JOB_MAX_BYTES = 200_000  # SQS allows 256 KiB; keep room for the envelope


class ExtractionPolicy(TurnPolicy):
    """`chain_id`/`chain_messages`: a council run is extracted once, over its members' replies and
    the lead's turn, with its cost under memory-extract:chain:<id8>."""

    def __init__(self, queues: JobQueues, *, chain_id: str | None = None, chain_messages: list[dict[str, object]] | None = None):
        self.queues = queues
        self.chain_id = chain_id
        self.chain_messages = chain_messages or []

    def after_commit(self, ctx: ToolContext, outcome: TurnOutcome) -> None:
        agent, run = ctx.agent, outcome.run
        if not agent.workspace_id and not agent.agent_memory:
            return  # extraction could store nothing: no job, no SQS call
        transcript = self.chain_messages + outcome.messages
        job: dict[str, Any] = {
            "runId": run.id,
            "tenant": ctx.tenant,
            "agentId": agent.id,
            # A clean-slate run is its own session: its cost lands under memory-extract:<runId>.
            "sessionId": run.session_id or run.id,
            "workspaceId": agent.workspace_id,
            "kind": run.kind,
            "messages": transcript,
        }
        if self.chain_id:
            job["chainId"] = self.chain_id
        while len(json.dumps(job, ensure_ascii=False).encode()) > _JOB_MAX_BYTES:
            if run.session_id is not None:
                job["messages"] = None  # the worker reads the session instead
                job["truncated"] = True
                break
            # No session to read back: keep the end (extraction caps the transcript at its end anyway).
            job["messages"] = job["messages"][len(job["messages"]) // 2 + 1 :] or [transcript[-1]]
            job["truncated"] = True
            if len(job["messages"]) == 1:
                break
        try:
            self.queues.enqueue_extraction(job)
        except Exception:
            logger.exception("could not enqueue extraction", extra={"run_id": run.id})
            metrics.add_metric(name="ExtractionEnqueueFailed", unit=MetricUnit.Count, value=1)
