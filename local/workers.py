"""SQS event sources, emulated: poll each queue a function consumes and hand it Lambda's SQS events.

Like Lambda's event source mapping: receive up to BatchSize messages, call the handler with
`{"Records": [...]}`, delete what succeeded. A raised exception fails the whole batch; with
ReportBatchItemFailures the `batchItemFailures` of the response name the failed ones (an
identifier that is not in the batch fails the whole batch, as in Lambda). Failed messages become
visible again after `retry_delay` seconds instead of the queue's long VisibilityTimeout, so local
retries are quick and the queue's own redrive policy moves poison messages to its DLQ.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any

import boto3

from .apigw import Functions, LoadedFunction
from .resources import Resources
from .template import SqsSource

log = logging.getLogger("local")

# Lambda's order of the system attributes in a record; anything else SQS returns follows.
_ATTRIBUTE_ORDER = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
)
_MAX_RECEIVE = 10  # SQS's per-call limit; bigger batch sizes take several receives in Lambda


def _lambda_message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        out["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
    out["stringListValues"] = list(value.get("StringListValues", []))
    out["binaryListValues"] = [base64.b64encode(b).decode() for b in value.get("BinaryListValues", [])]
    out["dataType"] = value["DataType"]
    return out


def sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One record of a Lambda SQS event, from a ReceiveMessage result (system and message attributes: All)."""
    received = message.get("Attributes", {})
    attributes = {k: received[k] for k in _ATTRIBUTE_ORDER if k in received}
    attributes.update({k: v for k, v in received.items() if k not in attributes})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {k: _lambda_message_attribute(v) for k, v in message.get("MessageAttributes", {}).items()},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def build_sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    return {"Records": [sqs_record(m, queue_arn, region) for m in messages]}


def failed_message_ids(result: Any, message_ids: list[str], report_failures: bool) -> set[str]:
    """Which records Lambda would leave on the queue after a handler returned `result`."""
    if not report_failures or not isinstance(result, dict):
        return set()
    failures = result.get("batchItemFailures")
    if not failures:
        return set()
    ids = set(message_ids)
    named = {f.get("itemIdentifier") if isinstance(f, dict) else None for f in failures}
    if not named <= ids:  # empty, null or unknown identifiers: Lambda fails the batch
        return ids
    return {i for i in named if i}


class SqsPoller:
    """One event source mapping: a function and the queue it consumes."""

    def __init__(self, function: LoadedFunction, source: SqsSource, resources: Resources, *, retry_delay: int = 2) -> None:
        self.function = function
        self.source = source
        self.queue_url = resources.queue_url(source.queue_id)
        self.queue_arn = resources.queue_arn(source.queue_id)
        self.region = resources.region
        self.retry_delay = max(0, int(retry_delay))
        self.sqs: Any = boto3.client("sqs", region_name=resources.region)

    def __repr__(self) -> str:
        return f"SqsPoller({self.source.queue_id} -> {self.function.spec.logical_id})"

    def receive(self, wait_seconds: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.source.batch_size:
            asked = min(_MAX_RECEIVE, self.source.batch_size - len(messages))
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=asked,
                WaitTimeSeconds=wait_seconds if not messages else 0,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            messages.extend(got)
            # A short answer means the queue had no more: hand the batch over now, as Lambda's
            # poller does, rather than ask again (a round trip before every queued turn).
            if len(got) < asked:
                break
        return messages

    def poll_once(self, wait_seconds: int = 1) -> int:
        """Receive one batch and process it; returns how many records were handed to the function."""
        messages = self.receive(wait_seconds)
        if not messages:
            return 0
        ids = [m["MessageId"] for m in messages]
        try:
            result = self.function.invoke(build_sqs_event(messages, self.queue_arn, self.region))
        except Exception:
            log.exception("%s failed a batch of %d from %s", self.function.function_name, len(messages), self.source.queue_id)
            failed = set(ids)
        else:
            failed = failed_message_ids(result, ids, self.source.report_failures)
        done = [m for m in messages if m["MessageId"] not in failed]
        retry = [m for m in messages if m["MessageId"] in failed]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        for start in range(0, len(retry), 10):
            chunk = retry[start : start + 10]
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": self.retry_delay}
                    for i, m in enumerate(chunk)
                ],
            )
        log.info(
            "%s <- %s: %d record(s), %d failed", self.function.spec.logical_id, self.source.queue_id, len(messages), len(retry)
        )
        return len(messages)


class Workers:
    """Background pollers for every SQS event source of the template's functions."""

    def __init__(self, functions: Functions, resources: Resources, *, retry_delay: int = 2, wait_seconds: int = 1) -> None:
        self.pollers = [
            SqsPoller(functions[source.function_id], source, resources, retry_delay=retry_delay)
            for source in functions.template.sqs_sources()
        ]
        self.resources = resources
        self.wait_seconds = wait_seconds
        self._sqs = boto3.client("sqs", region_name=resources.region)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        for poller in self.pollers:
            thread = threading.Thread(target=self._loop, args=(poller,), name=f"sqs-{poller.source.queue_id}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _loop(self, poller: SqsPoller) -> None:
        while not self._stop.is_set():
            try:
                poller.poll_once(self.wait_seconds)
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("polling %s failed", poller.source.queue_id)
                self._stop.wait(1)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def queue_depth(self, queue_id: str) -> int:
        """Visible + in flight + delayed messages."""
        attrs = self._sqs.get_queue_attributes(
            QueueUrl=self.resources.queue_url(queue_id),
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attrs.values())

    def drain(self, queue_id: str, timeout: float = 30.0) -> int:
        """Process `queue_id` in the calling thread until it is empty (retries and redrives included);
        returns the number of records handed to functions. Raises TimeoutError past `timeout`."""
        pollers = [p for p in self.pollers if p.source.queue_id == queue_id]
        if not pollers:
            raise ValueError(f"no function consumes {queue_id}")
        deadline = time.monotonic() + timeout
        handled = 0
        while True:
            progressed = sum(p.poll_once(wait_seconds=0) for p in pollers)
            handled += progressed
            if not progressed and self.queue_depth(queue_id) == 0:
                return handled
            if time.monotonic() > deadline:
                raise TimeoutError(f"{queue_id} still holds {self.queue_depth(queue_id)} message(s) after {timeout} s")
            if not progressed:
                time.sleep(0.05)  # waiting for a retry delay or another consumer's in-flight batch
