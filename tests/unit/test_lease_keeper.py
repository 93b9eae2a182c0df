"""The lease a turn holds is renewed while the turn runs, and only then (issue 22, item 8)."""

from __future__ import annotations

import threading
from typing import Any

from engram.engine.lease import LeaseKeeper


class Sessions:
    def __init__(self, held: int, fail_first: bool = False) -> None:
        self.renewals: list[tuple[Any, ...]] = []
        self.held = held  # renewals that find the lease still ours
        self.fail_first = fail_first
        self.done = threading.Event()

    def renew_lease(self, *args: Any) -> bool:
        self.renewals.append(args)
        if self.fail_first and len(self.renewals) == 1:
            raise ConnectionError("storage is down")  # an outage: the keeper tries again next time
        if len(self.renewals) >= self.held:
            self.done.set()
            return False  # lost (released, or taken after it expired): no more renewals
        return True


def test_the_keeper_renews_until_the_lease_is_lost_even_through_a_failed_renewal():
    sessions = Sessions(held=3, fail_first=True)
    keeper = LeaseKeeper(sessions, "t", "ag_1", "dashboard", "run_1", ttl_s=0.06).start()  # type: ignore[arg-type]
    assert sessions.done.wait(10)
    keeper._thread.join(10)
    assert not keeper._thread.is_alive()  # a lost lease ends the renewals
    assert sessions.renewals == [("t", "ag_1", "dashboard", "run_1", 0.06)] * 3


def test_stop_ends_the_renewals():
    sessions = Sessions(held=10**6)
    keeper = LeaseKeeper(sessions, "t", "ag_1", "dashboard", "run_1", ttl_s=0.03).start()  # type: ignore[arg-type]
    keeper.stop()
    keeper._thread.join(10)
    assert not keeper._thread.is_alive()
