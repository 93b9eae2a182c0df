"""SQS: the FIFO turn queue (one message group per session), the extraction queue and the run queue."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engram.aws.clients import make_client


class Queues:
    def __init__(self, turn_queue_url: str, extract_queue_url: str, client: object = None, run_queue_url: str = ""):
        self.turn_queue_url = turn_queue_url
        self.extract_queue_url = extract_queue_url
        self.run_queue_url = run_queue_url
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("sqs")
        return self._client

    def enqueue_turn(self, job: Mapping[str, object], *, group: str, dedup_id: str) -> None:
        """Turns of one session share a message group, so SQS hands them out one at a time, in order."""
        self.client.send_message(
            QueueUrl=self.turn_queue_url,
            MessageBody=json.dumps(job, separators=(",", ":")),
            MessageGroupId=group,
            MessageDeduplicationId=dedup_id,
        )

    def enqueue_extraction(self, job: Mapping[str, object]) -> None:
        self.client.send_message(QueueUrl=self.extract_queue_url, MessageBody=json.dumps(job, separators=(",", ":")))

    def enqueue_run(self, job: Mapping[str, object], *, delay_s: int = 0) -> None:
        """API-started runs (manual, re-examination) for the heartbeat function."""
        extra = {"DelaySeconds": delay_s} if delay_s else {}
        self.client.send_message(QueueUrl=self.run_queue_url, MessageBody=json.dumps(job, separators=(",", ":")), **extra)
