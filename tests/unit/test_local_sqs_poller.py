"""local/workers.py's SqsPoller receives as Lambda's poller does: a batch is handed over as soon as
a receive comes back short (no second round trip before every queued turn); batches bigger than
SQS's 10 a call take several receives."""

from __future__ import annotations

from typing import Any

from local.template import SqsSource
from local.workers import SqsPoller


class FakeQueue:
    def __init__(self, waiting: int) -> None:
        self.waiting = waiting
        self.receives: list[int] = []

    def receive_message(self, **request: Any) -> dict[str, Any]:
        self.receives.append(request["MaxNumberOfMessages"])
        n = min(self.waiting, request["MaxNumberOfMessages"])
        self.waiting -= n
        return {"Messages": [{"MessageId": str(i)} for i in range(n)]}


def _poller(batch_size: int, queue: FakeQueue) -> SqsPoller:
    poller = SqsPoller.__new__(SqsPoller)  # no resources: the queue is the fake
    poller.source = SqsSource("ChatFunction", "TurnJobs", "TurnQueue", batch_size, True)
    poller.queue_url, poller.sqs = "local", queue
    return poller


def test_one_waiting_turn_is_handed_over_after_one_receive():
    queue = FakeQueue(waiting=1)
    assert len(_poller(5, queue).receive(wait_seconds=1)) == 1
    assert queue.receives == [5]


def test_a_batch_bigger_than_one_receive_takes_several():
    queue = FakeQueue(waiting=25)
    assert len(_poller(25, queue).receive(wait_seconds=1)) == 25
    assert queue.receives == [10, 10, 5]
