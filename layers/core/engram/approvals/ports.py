"""The store of approval decisions (TL10), as the approvals service sees it."""

from __future__ import annotations

from typing import Protocol

from engram.runs.models import Run


class Approvals(Protocol):
    def decide(self, tenant: str, run: Run, index: int, decision: dict[str, object], *, stale_at: int) -> Run:
        """Records one decision on the run's pending approval `index` (a conditional write: Conflict
        `already_decided` when it was decided already or the run is not waiting any more);
        `stale_at` is when the sweeper looks at the run next."""
        ...
