"""The session lease a turn holds (CM7), kept short and renewed while the turn runs.

A lease as long as the turn's budget outlives a turn that could not release it (an outage that
refused both its commit and the release): the session stayed busy for the whole budget after
storage came back. So a lease lasts SESSION_LEASE_SECONDS (10 s), and while its turn runs a
renewer extends it every third of that; the turn's end (commit or failure) releases it, and a turn
that could not release it (or a process that died) leaves it to expire within one lease.
A renewal that lands after the release or after another owner took the session changes nothing
(it is conditional on this owner).
"""

from __future__ import annotations

import threading
import time

from engram.aws.deadline import within
from engram.conversations.ports import Sessions
from engram.kernel.observability import logger

_RELEASE_TRIES = 3  # a release refused by a short outage is tried again within the grace


class LeaseKeeper:
    """Renews one owner's lease every `ttl_s / 3` seconds until `stop()` (or until it is lost)."""

    def __init__(self, sessions: Sessions, tenant: str, agent_id: str, session_id: str, owner: str, ttl_s: float):
        self._sessions = sessions
        self._key = (tenant, agent_id, session_id, owner)
        self._ttl_s = ttl_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engram-lease", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        """No more renewals (one in flight ends by its own bound)."""
        self._stop.set()

    def _run(self) -> None:
        interval = self._ttl_s / 3
        while not self._stop.wait(interval):
            try:
                with within(time.monotonic() + interval):
                    if not self._sessions.renew_lease(*self._key, self._ttl_s):
                        return  # not ours any more: the commit, conditional on it, will say so
            except Exception:
                logger.warning("could not renew the session lease; it expires unless a later renewal lands", exc_info=True)


def release_quietly(sessions: Sessions, tenant: str, agent_id: str, session_id: str, run_id: str, *, grace_s: float) -> None:
    """Frees a lease this turn took, tried again if refused (best-effort: it expires on its own
    within SESSION_LEASE_SECONDS), with a short bound of its own: it runs when the turn's
    deadline may have passed already."""
    give_up = time.monotonic() + grace_s
    for attempt in range(_RELEASE_TRIES):
        try:
            with within(give_up):
                sessions.release_lease(tenant, agent_id, session_id, run_id)
            return
        except Exception:
            logger.warning("could not release the session lease", extra={"run_id": run_id, "attempt": attempt + 1}, exc_info=True)
        pause = 0.1 * 3**attempt
        if time.monotonic() + pause >= give_up:
            return
        time.sleep(pause)
