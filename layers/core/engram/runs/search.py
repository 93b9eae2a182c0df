"""Runs across an agent's or all of a person's agents, filtered (agent, kind, status, a time
range, words) and paged newest first: `GET /api/runs` and the `q` of an agent's runs.

No index holds these filters together, so runs are read newest first in batches and kept when
they match, until the page is full or READ_MAX runs were read; the token is the last run read
(run ids are time-ordered), so the next page goes on below it. A page can hold fewer than `limit`
runs (the read budget ran out); `nextToken` says whether more may follow. Words (`q`) are matched
as the memory search matches (engram.kernel.textsearch) against the prompt, the result and the
error; the order stays newest first, which is what a runs list is read by.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id
from engram.kernel.model import page
from engram.kernel.textsearch import TextQuery
from engram.runs.models import Run

if TYPE_CHECKING:
    from engram.runs.ports import Runs

READ_MAX = 2000  # runs read per request at most
BATCH = 100


@dataclass(frozen=True)
class RunFilter:
    agent_id: str | None = None
    kinds: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    since: str | None = None  # ISO times, inclusive
    until: str | None = None
    query: TextQuery | None = None
    council_run_id: str | None = None  # the members of this lead's council run

    def matches(self, run: Run) -> bool:
        if self.council_run_id and run.council_run_id != self.council_run_id:
            return False
        if self.kinds and run.kind not in self.kinds:
            return False
        if self.statuses and run.status not in self.statuses:
            return False
        if self.until and run.created_at > self.until:
            return False
        if self.query is None:
            return True
        result = run.result if isinstance(run.result, str) else json.dumps(run.result or "", default=str)
        error = (run.error or {}).get("message")
        return self.query.score(run.prompt, result, str(error or "")) > 0


def _token(run_id: str) -> str:
    return base64.urlsafe_b64encode(f"runs:{run_id}".encode()).decode().rstrip("=")


def _cursor(token: str | None) -> str | None:
    if not token:
        return None
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not text.startswith("runs:"):
        raise BadRequest("nextToken is not a token this list issued", field="nextToken", code="invalid_token")
    return check_id("nextToken", text.removeprefix("runs:"))


def search_runs(runs: Runs, tenant: str, wanted: RunFilter, *, limit: int, token: str | None) -> dict[str, object]:
    cursor = _cursor(token)
    found: list[Run] = []
    read = 0
    done = False  # no run is left below the cursor
    while not done and len(found) < limit and read < READ_MAX:
        batch = runs.newest(tenant, agent_id=wanted.agent_id, before=cursor, max_items=BATCH)
        for run in batch:
            if wanted.since and run.created_at < wanted.since:
                done = True  # every run below this one is older still
                break
            read += 1
            cursor = run.id
            if wanted.matches(run):
                found.append(run)
                if len(found) == limit:
                    break
        if len(found) < limit and len(batch) < BATCH:
            done = True
    return page(found, None if done or cursor is None else _token(cursor))
