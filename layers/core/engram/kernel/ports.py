"""Ports shared by several features."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class JobQueues(Protocol):
    """The three job queues: turns (FIFO, one group per session), extraction jobs and API-started runs."""

    def enqueue_turn(self, job: Mapping[str, object], *, group: str, dedup_id: str) -> None:
        """Turns of one session share a message group, so SQS hands them out one at a time, in order."""
        ...

    def enqueue_extraction(self, job: Mapping[str, object]) -> None: ...

    def enqueue_run(self, job: Mapping[str, object], *, delay_s: int = 0) -> None:
        """API-started runs (manual, re-examination) for the heartbeat function."""
        ...
