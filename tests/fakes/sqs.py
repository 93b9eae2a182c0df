"""An in-memory SQS client: standard and FIFO queues with visibility, delays, dedup and redrive.

Why: the turn, extraction and run queues are drained by local/workers.py (Lambda's event source
mapping, emulated) from threads; a behaviour test sends, drains and retries many messages, and
this answers in microseconds with the same parameter validation (botocore's own), exception
classes (`client.exceptions.QueueDoesNotExist`...) and error codes as a real client on SQS's JSON
protocol. What it models, like SQS (checked against moto by tests/contract):

- queues from the template's attributes (FifoQueue, ContentBasedDeduplication, VisibilityTimeout,
  DelaySeconds, MessageRetentionPeriod, RedrivePolicy...), URLs and ARNs shaped like moto's;
- delivery: a message is invisible while delayed (DelaySeconds) or in flight (VisibilityTimeout),
  ReceiveMessage long-polls (WaitTimeSeconds) and returns the system attributes asked for;
- FIFO: MessageGroupId required, MessageDeduplicationId or content-based dedup over 5 minutes
  (also after the first message was deleted, as SQS; moto only dedups against queued messages),
  order kept within a group, and no message of a group is delivered while an earlier one of the
  same group is in flight; no per-message DelaySeconds;
- redrive: a message already received maxReceiveCount times moves to the dead-letter queue when
  it would be received once more (like SQS and moto);
- receipt handles: the latest one deletes; an older one of a message received again succeeds
  without deleting (SQS's documented behaviour; moto deletes); an unknown one is invalid.

Time: time.monotonic() for visibility and delays, time.time() for the timestamps SQS reports.
Thread-safe: one lock, and a condition that long polls wait on.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from botocore.exceptions import ClientError
from botocore.model import ServiceModel

from tests.fakes import client_error
from tests.fakes._botocore import FakeClient, service
from tests.fakes._botocore import ok as _ok

SERVICE = "sqs"
ACCOUNT_ID = "123456789012"  # moto's default account, as local/resources.py
SENDER_ID = "AIDAIT2UOQQY3AUEKVGXU"
DEDUP_WINDOW_S = 300.0
PURGE_INTERVAL_S = 60.0
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_BATCH_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")

# The JSON protocol's error code (what `err.response["Error"]["Code"]` says) for each modelled
# error; the exception class follows the QueryErrorCode, as botocore does for SQS.
_CODES = {
    "QueueDoesNotExist": "AWS.SimpleQueueService.NonExistentQueue",
    "QueueNameExists": "QueueAlreadyExists",
    "PurgeQueueInProgress": "AWS.SimpleQueueService.PurgeQueueInProgress",
    "EmptyBatchRequest": "AWS.SimpleQueueService.EmptyBatchRequest",
    "TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    "BatchEntryIdsNotDistinct": "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
    "MessageNotInflight": "AWS.SimpleQueueService.MessageNotInflight",
    "MissingRequiredParameterException": "MissingParameter",
}

# Settable attributes: (default for a new queue, min, max) for the numeric ones.
_NUMERIC = {
    "DelaySeconds": (0, 0, 900),
    "MaximumMessageSize": (1_048_576, 1024, 1_048_576),
    "MessageRetentionPeriod": (345_600, 60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, 0, 20),
    "VisibilityTimeout": (30, 0, 43_200),
    "KmsDataKeyReusePeriodSeconds": (300, 60, 86_400),
}
_BOOLEAN = ("FifoQueue", "ContentBasedDeduplication", "SqsManagedSseEnabled")
_OTHER = ("Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId", "DeduplicationScope", "FifoThroughputLimit")
_COMPUTED = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
)
_SYSTEM_ATTRIBUTES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageDeduplicationId",
    "MessageGroupId",
    "DeadLetterQueueSourceArn",
)


# --------------------------------------------------------------------------- botocore's view of the service
def _model() -> tuple[ServiceModel, Any, dict[str, Any]]:
    return service(SERVICE)


def _error(operation: str, query_code: str, message: str) -> ClientError:
    """SQS's error as botocore parses it: Code from the query-compatible header, class from the shape."""
    err = client_error(operation, _CODES.get(query_code, query_code), message, status=400)
    err.response["Error"].update({"QueryErrorCode": query_code, "Type": "Sender"})
    cls = _model()[1].from_code(query_code)
    return cls(err.response, operation) if cls is not ClientError else err


def _invalid(operation: str, message: str) -> ClientError:
    return _error(operation, "InvalidParameterValue", message)


def md5_of_attributes(attributes: dict[str, Any]) -> str:
    """SQS's MD5OfMessageAttributes: names sorted, each field length-prefixed, 1=string 2=binary."""

    def encoded(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(encoded(name.encode()) + encoded(value["DataType"].encode()))
        if "StringValue" in value:
            digest.update(b"\x01" + encoded(value["StringValue"].encode()))
        else:
            digest.update(b"\x02" + encoded(bytes(value["BinaryValue"])))
    return digest.hexdigest()


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- state
@dataclass(eq=False)  # identity: two messages are never the same one
class _Message:
    id: str
    body: str
    attributes: dict[str, Any]  # message attributes
    sent_ms: int  # epoch milliseconds, for SentTimestamp
    enqueued: float  # monotonic, for the retention period
    visible_at: float  # monotonic: the end of the delay (never received) or of the visibility timeout
    group: str | None = None
    dedup: str | None = None
    sequence: str | None = None
    source_arn: str | None = None  # the queue it was redriven from
    receive_count: int = 0
    first_receive_ms: int | None = None
    handle: str | None = None  # the latest receipt handle

    def delayed(self, now: float) -> bool:
        return self.receive_count == 0 and now < self.visible_at

    def in_flight(self, now: float) -> bool:
        return self.receive_count > 0 and now < self.visible_at


@dataclass
class _Queue:
    name: str
    url: str
    arn: str
    attributes: dict[str, str]
    created: int
    modified: int
    messages: list[_Message] = field(default_factory=list)  # in send order
    handles: dict[str, _Message] = field(default_factory=dict)  # every handle issued, latest or not
    dedup: dict[tuple[str | None, str], tuple[float, str, str | None]] = field(default_factory=dict)
    last_purge: float | None = None

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoQueue") == "true"

    def redrive(self) -> tuple[str, int] | None:
        raw = self.attributes.get("RedrivePolicy")
        if not raw:
            return None
        policy = json.loads(raw)
        return str(policy["deadLetterTargetArn"]), int(policy["maxReceiveCount"])


class FakeSQS(FakeClient):
    SERVICE = SERVICE

    """What `boto3.client("sqs")` returns inside `fake_aws()`. Thread-safe."""

    def __init__(self, region: str = "us-east-1"):
        super().__init__(region)
        self._queues: dict[str, _Queue] = {}
        self._changed = threading.Condition(threading.RLock())
        self._sequence = 18_000_000_000_000_000_000

    # ------------------------------------------------------------------ client plumbing
    def _queue(self, operation: str, url: str) -> _Queue:
        # Like moto, the queue is found by the last path segment of its URL.
        queue = self._queues.get(urlparse(url).path.rstrip("/").rsplit("/", 1)[-1])
        if queue is None:
            raise _error(operation, "QueueDoesNotExist", "The specified queue does not exist.")
        return queue

    def _by_arn(self, arn: str) -> _Queue | None:
        return next((q for q in self._queues.values() if q.arn == arn), None)

    # ------------------------------------------------------------------ queues
    def _normalised(self, operation: str, attributes: dict[str, str], *, fifo: bool) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, raw in attributes.items():
            value = str(raw)
            if name in _NUMERIC:
                _, low, high = _NUMERIC[name]
                if not value.lstrip("-").isdigit() or not low <= int(value) <= high:
                    raise _error(operation, "InvalidAttributeValue", f"Invalid value for the parameter {name}.")
                out[name] = str(int(value))
            elif name in _BOOLEAN:
                if value.lower() not in ("true", "false"):
                    raise _error(operation, "InvalidAttributeValue", f"Invalid value for the parameter {name}.")
                out[name] = value.lower()
            elif name == "RedrivePolicy":
                out[name] = self._redrive_policy(operation, value, fifo=fifo)
            elif name in _OTHER:
                out[name] = value
            else:
                raise _error(operation, "InvalidAttributeName", f"Unknown Attribute {name}.")
        for fifo_only in ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"):
            if not fifo and fifo_only in out:
                raise _error(operation, "InvalidAttributeName", f"Unknown Attribute {fifo_only}.")
        if out.get("FifoQueue") == "false":
            del out["FifoQueue"]
        return out

    def _redrive_policy(self, operation: str, raw: str, *, fifo: bool) -> str:
        try:
            policy = json.loads(raw)
            target, count = str(policy["deadLetterTargetArn"]), int(policy["maxReceiveCount"])
        except (ValueError, KeyError, TypeError):
            raise _error(operation, "InvalidAttributeValue", "Invalid value for the parameter RedrivePolicy.") from None
        dlq = self._by_arn(target)
        if dlq is None:
            raise _error(
                operation,
                "InvalidAttributeValue",
                "Value for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.",
            )
        if dlq.fifo != fifo or not 1 <= count <= 1000:
            raise _error(operation, "InvalidAttributeValue", "Invalid value for the parameter RedrivePolicy.")
        return json.dumps({"deadLetterTargetArn": target, "maxReceiveCount": count})

    def create_queue(self, **params: Any) -> dict[str, Any]:
        self._validate("CreateQueue", params)
        name = params["QueueName"]
        requested = params.get("Attributes", {})
        fifo = str(requested.get("FifoQueue", "false")).lower() == "true"
        base = name.removesuffix(".fifo") if fifo else name
        if fifo != name.endswith(".fifo") or not _QUEUE_NAME.match(base):
            message = (
                "Queue name must end in .fifo for FIFO queues"
                if fifo
                else "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
            )
            raise _invalid("CreateQueue", message)
        with self._changed:
            attributes = self._normalised("CreateQueue", requested, fifo=fifo)
            existing = self._queues.get(name)
            if existing is not None:
                if any(existing.attributes.get(k) != v for k, v in attributes.items()):
                    raise _error("CreateQueue", "QueueNameExists", "The specified queue already exists.")
                return _ok({"QueueUrl": existing.url})
            defaults = {k: str(d) for k, (d, _, _) in _NUMERIC.items() if k != "KmsDataKeyReusePeriodSeconds"}
            defaults["SqsManagedSseEnabled"] = "true"
            if fifo:
                defaults.update(ContentBasedDeduplication="false", DeduplicationScope="queue", FifoThroughputLimit="perQueue")
            now = int(time.time())
            self._queues[name] = _Queue(
                name=name,
                url=f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}",
                arn=f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}",
                attributes={**defaults, **attributes},
                created=now,
                modified=now,
            )
            return _ok({"QueueUrl": self._queues[name].url})

    def get_queue_url(self, **params: Any) -> dict[str, Any]:
        self._validate("GetQueueUrl", params)
        with self._changed:
            queue = self._queues.get(params["QueueName"])
            if queue is None:
                raise _error("GetQueueUrl", "QueueDoesNotExist", "The specified queue does not exist.")
            return _ok({"QueueUrl": queue.url})

    def list_queues(self, **params: Any) -> dict[str, Any]:
        self._validate("ListQueues", params)
        prefix = params.get("QueueNamePrefix", "")
        with self._changed:
            urls = [q.url for name, q in sorted(self._queues.items()) if name.startswith(prefix)]
        return _ok({"QueueUrls": urls} if urls else {})

    def delete_queue(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteQueue", params)
        with self._changed:
            del self._queues[self._queue("DeleteQueue", params["QueueUrl"]).name]
            self._changed.notify_all()
        return _ok({})

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        self._validate("GetQueueAttributes", params)
        names = params.get("AttributeNames", [])
        with self._changed:
            queue = self._queue("GetQueueAttributes", params["QueueUrl"])
            now = time.monotonic()
            self._expire(queue, now)
            delayed = sum(m.delayed(now) for m in queue.messages)
            in_flight = sum(m.in_flight(now) for m in queue.messages)
            everything = {
                "ApproximateNumberOfMessages": str(len(queue.messages) - delayed - in_flight),
                "ApproximateNumberOfMessagesNotVisible": str(in_flight),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
                "CreatedTimestamp": str(queue.created),
                "LastModifiedTimestamp": str(queue.modified),
                "QueueArn": queue.arn,
                **queue.attributes,
            }
        if not names:
            return _ok({})
        if "All" in names:
            return _ok({"Attributes": everything})
        unknown = [n for n in names if n not in (*_COMPUTED, *_NUMERIC, *_BOOLEAN, *_OTHER)]
        if unknown:
            raise _error("GetQueueAttributes", "InvalidAttributeName", f"Unknown Attribute {unknown[0]}.")
        return _ok({"Attributes": {n: everything[n] for n in names if n in everything}})

    def set_queue_attributes(self, **params: Any) -> dict[str, Any]:
        self._validate("SetQueueAttributes", params)
        with self._changed:
            queue = self._queue("SetQueueAttributes", params["QueueUrl"])
            if "FifoQueue" in params["Attributes"]:
                raise _error("SetQueueAttributes", "InvalidAttributeName", "Unknown Attribute FifoQueue.")
            queue.attributes.update(self._normalised("SetQueueAttributes", params["Attributes"], fifo=queue.fifo))
            queue.modified = int(time.time())
            self._changed.notify_all()
        return _ok({})

    def purge_queue(self, **params: Any) -> dict[str, Any]:
        self._validate("PurgeQueue", params)
        with self._changed:
            queue = self._queue("PurgeQueue", params["QueueUrl"])
            now = time.monotonic()
            if queue.last_purge is not None and now - queue.last_purge < PURGE_INTERVAL_S:
                raise _error(
                    "PurgeQueue",
                    "PurgeQueueInProgress",
                    f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds.",
                )
            queue.last_purge = now
            queue.messages.clear()
        return _ok({})

    # ------------------------------------------------------------------ sending
    def _check_attributes(self, operation: str, attributes: dict[str, Any]) -> None:
        if len(attributes) > 10:
            raise _invalid(operation, f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum [10].")
        for name, value in attributes.items():
            kind = value.get("DataType", "").split(".", 1)[0]
            if kind not in ("String", "Number", "Binary"):
                raise _invalid(operation, f"The message attribute '{name}' has an invalid message attribute type.")
            if ("BinaryValue" if kind == "Binary" else "StringValue") not in value:
                raise _invalid(operation, f"The message attribute '{name}' must contain a non-empty message attribute value.")

    def _send(self, operation: str, queue: _Queue, entry: dict[str, Any]) -> dict[str, Any]:
        """One message into `queue` (the caller holds the lock); the SendMessage result."""
        body = entry["MessageBody"]
        if not body:
            raise _error(operation, "MissingRequiredParameterException", "The request must contain the parameter MessageBody.")
        if len(body.encode("utf-8")) > int(queue.attributes["MaximumMessageSize"]):
            raise _invalid(
                operation,
                "One or more parameters are invalid. Reason: Message must be shorter than the queue's MaximumMessageSize.",
            )
        attributes = copy.deepcopy(entry.get("MessageAttributes", {}))
        self._check_attributes(operation, attributes)
        group, dedup = entry.get("MessageGroupId"), entry.get("MessageDeduplicationId")
        scope: str | None = None  # the dedup key's group part: None when the scope is the queue
        now = time.monotonic()
        out: dict[str, Any] = {"MD5OfMessageBody": _md5(body)}
        if attributes:
            out["MD5OfMessageAttributes"] = md5_of_attributes(attributes)
        if queue.fifo:
            if not group:
                raise _error(
                    operation, "MissingRequiredParameterException", "The request must contain the parameter MessageGroupId."
                )
            if "DelaySeconds" in entry:
                raise _invalid(
                    operation,
                    f"Value {entry['DelaySeconds']} for parameter DelaySeconds is invalid. Reason: The request include "
                    "parameter that is not valid for this queue type.",
                )
            if not dedup:
                if queue.attributes.get("ContentBasedDeduplication") != "true":
                    raise _invalid(
                        operation,
                        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
                    )
                dedup = hashlib.sha256(body.encode("utf-8")).hexdigest()
            scope = group if queue.attributes.get("DeduplicationScope") == "messageGroup" else None
            seen = queue.dedup.get((scope, dedup))
            if seen is not None and seen[0] > now:  # accepted, not delivered again
                return {**out, "MessageId": seen[1], "SequenceNumber": seen[2]}
        elif dedup:
            raise _invalid(
                operation,
                "Value for parameter MessageDeduplicationId is invalid. Reason: The request includes a parameter that is "
                "not valid for this queue type.",
            )
        delay = int(entry.get("DelaySeconds", queue.attributes.get("DelaySeconds", 0)))
        if not 0 <= delay <= 900:
            raise _invalid(operation, f"Value {delay} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.")
        message = _Message(
            id=str(uuid.uuid4()),
            body=body,
            attributes=attributes,
            sent_ms=int(time.time() * 1000),
            enqueued=now,
            visible_at=now + delay,
            group=group,
        )
        if queue.fifo:
            self._sequence += 1
            message.dedup, message.sequence = dedup, str(self._sequence)
            queue.dedup[(scope, str(dedup))] = (now + DEDUP_WINDOW_S, message.id, message.sequence)
            out["SequenceNumber"] = message.sequence
        queue.messages.append(message)
        self._changed.notify_all()
        return {**out, "MessageId": message.id}

    def send_message(self, **params: Any) -> dict[str, Any]:
        self._validate("SendMessage", params)
        with self._changed:
            queue = self._queue("SendMessage", params["QueueUrl"])
            return _ok(self._send("SendMessage", queue, params))

    def _check_batch(self, operation: str, entries: list[dict[str, Any]], action: str) -> None:
        if not entries:
            raise _error(
                operation, "EmptyBatchRequest", f"There should be at least one {action}BatchRequestEntry in the request."
            )
        if len(entries) > 10:
            raise _error(
                operation,
                "TooManyEntriesInBatchRequest",
                f"Maximum number of entries per request are 10. You have sent {len(entries)}.",
            )
        ids = [e["Id"] for e in entries]
        for entry_id in ids:
            if ids.count(entry_id) > 1:
                raise _error(operation, "BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
            if not _BATCH_ID.match(entry_id):
                raise _error(
                    operation,
                    "InvalidBatchEntryId",
                    "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
                    "It can be at most 80 letters long.",
                )

    @staticmethod
    def _failed(entry_id: str, err: ClientError) -> dict[str, Any]:
        error = err.response["Error"]
        return {
            "Id": entry_id,
            "SenderFault": True,
            "Code": error.get("QueryErrorCode", error["Code"]),
            "Message": error["Message"],
        }

    def send_message_batch(self, **params: Any) -> dict[str, Any]:
        self._validate("SendMessageBatch", params)
        entries = params["Entries"]
        self._check_batch("SendMessageBatch", entries, "SendMessage")
        successful: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        with self._changed:
            queue = self._queue("SendMessageBatch", params["QueueUrl"])
            for entry in entries:
                try:
                    successful.append({"Id": entry["Id"], **self._send("SendMessageBatch", queue, entry)})
                except ClientError as err:
                    failed.append(self._failed(entry["Id"], err))
        return _ok({"Successful": successful, "Failed": failed})

    # ------------------------------------------------------------------ receiving
    @staticmethod
    def _expire(queue: _Queue, now: float) -> None:
        retention = int(queue.attributes["MessageRetentionPeriod"])
        if queue.messages and now - queue.messages[0].enqueued > retention:
            queue.messages[:] = [m for m in queue.messages if now - m.enqueued <= retention]
        if len(queue.dedup) > 1000:
            queue.dedup = {k: v for k, v in queue.dedup.items() if v[0] > now}

    def _take(self, queue: _Queue, count: int, visibility: int, now: float) -> list[_Message]:
        """Marks up to `count` deliverable messages received (the caller holds the lock); redrives
        the ones received maxReceiveCount times already."""
        self._expire(queue, now)
        blocked = {m.group for m in queue.messages if queue.fifo and m.in_flight(now)}
        redrive = queue.redrive()
        dlq = self._by_arn(redrive[0]) if redrive else None
        taken: list[_Message] = []
        for message in list(queue.messages):
            if len(taken) >= count:
                break
            if queue.fifo and message.group in blocked:
                continue
            if message.delayed(now) or message.in_flight(now):
                if queue.fifo:
                    blocked.add(message.group)  # nothing later in this group may overtake it
                continue
            if redrive and dlq is not None and message.receive_count >= redrive[1]:
                queue.messages.remove(message)
                message.handle, message.visible_at, message.source_arn = None, now, queue.arn
                dlq.messages.append(message)
                self._changed.notify_all()
                continue
            message.receive_count += 1
            message.first_receive_ms = message.first_receive_ms or int(time.time() * 1000)
            message.visible_at = now + visibility
            message.handle = uuid.uuid4().hex + uuid.uuid4().hex
            queue.handles[message.handle] = message
            taken.append(message)
        return taken

    @staticmethod
    def _system_attributes(message: _Message, names: set[str]) -> dict[str, str]:
        values = {
            "SenderId": SENDER_ID,
            "SentTimestamp": str(message.sent_ms),
            "ApproximateReceiveCount": str(message.receive_count),
            "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
            "SequenceNumber": message.sequence,
            "MessageDeduplicationId": message.dedup,
            "MessageGroupId": message.group,
            "DeadLetterQueueSourceArn": message.source_arn,
        }
        wanted = set(_SYSTEM_ATTRIBUTES) if "All" in names else names
        return {k: v for k, v in values.items() if k in wanted and v is not None}

    @staticmethod
    def _message_attributes(message: _Message, names: list[str]) -> dict[str, Any]:
        def wanted(name: str) -> bool:
            return any(n in ("All", ".*") or n == name or (n.endswith(".*") and name.startswith(n[:-1])) for n in names)

        return {k: copy.deepcopy(v) for k, v in message.attributes.items() if wanted(k)}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self._validate("ReceiveMessage", params)
        count = int(params.get("MaxNumberOfMessages", 1))
        if not 1 <= count <= 10:
            raise _invalid(
                "ReceiveMessage",
                f"Value {count} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.",
            )
        system_names = set(params.get("AttributeNames", [])) | set(params.get("MessageSystemAttributeNames", []))
        attribute_names = list(params.get("MessageAttributeNames", []))
        with self._changed:
            queue = self._queue("ReceiveMessage", params["QueueUrl"])
            wait = int(params.get("WaitTimeSeconds", queue.attributes["ReceiveMessageWaitTimeSeconds"]))
            visibility = int(params.get("VisibilityTimeout", queue.attributes["VisibilityTimeout"]))
            if not 0 <= wait <= 20:
                raise _invalid(
                    "ReceiveMessage",
                    f"Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
                )
            if not 0 <= visibility <= 43_200:
                raise _invalid("ReceiveMessage", f"Value {visibility} for parameter VisibilityTimeout is invalid.")
            deadline = time.monotonic() + wait
            while True:
                now = time.monotonic()
                taken = self._take(queue, count, visibility, now)
                if taken or now >= deadline:
                    break
                upcoming = [m.visible_at for m in queue.messages if m.visible_at > now]
                self._changed.wait(min([deadline, *upcoming]) - now + 0.001)
                if queue.name not in self._queues:
                    raise _error("ReceiveMessage", "QueueDoesNotExist", "The specified queue does not exist.")
            messages = []
            for m in taken:
                out: dict[str, Any] = {"MessageId": m.id, "ReceiptHandle": m.handle, "MD5OfBody": _md5(m.body), "Body": m.body}
                system = self._system_attributes(m, system_names)
                if system:
                    out["Attributes"] = system
                selected = self._message_attributes(m, attribute_names)
                if selected:
                    out["MD5OfMessageAttributes"] = md5_of_attributes(selected)
                    out["MessageAttributes"] = selected
                messages.append(out)
        return _ok({"Messages": messages} if messages else {})

    # ------------------------------------------------------------------ acknowledging
    def _delete(self, operation: str, queue: _Queue, handle: str) -> None:
        message = queue.handles.get(handle)
        if message is None:
            raise _error(
                operation, "ReceiptHandleIsInvalid", f'The input receipt handle "{handle}" is not a valid receipt handle.'
            )
        # An older handle, or a message already deleted or redriven: success, and nothing to do.
        if message.handle == handle and message in queue.messages:
            queue.messages.remove(message)
            self._changed.notify_all()

    def delete_message(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteMessage", params)
        with self._changed:
            self._delete("DeleteMessage", self._queue("DeleteMessage", params["QueueUrl"]), params["ReceiptHandle"])
        return _ok({})

    def delete_message_batch(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteMessageBatch", params)
        entries = params["Entries"]
        self._check_batch("DeleteMessageBatch", entries, "DeleteMessage")
        successful, failed = [], []
        with self._changed:
            queue = self._queue("DeleteMessageBatch", params["QueueUrl"])
            for entry in entries:
                try:
                    self._delete("DeleteMessageBatch", queue, entry["ReceiptHandle"])
                    successful.append({"Id": entry["Id"]})
                except ClientError as err:
                    failed.append(self._failed(entry["Id"], err))
        return _ok({"Successful": successful, "Failed": failed})

    def _change_visibility(self, operation: str, queue: _Queue, handle: str, timeout: int) -> None:
        if not 0 <= timeout <= 43_200:
            raise _invalid(
                operation, f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200."
            )
        message = queue.handles.get(handle)
        if message is None or message not in queue.messages:
            raise _error(operation, "ReceiptHandleIsInvalid", "The input receipt handle is invalid.")
        if message.handle == handle:  # an older handle changes nothing for the newer receiver
            message.visible_at = time.monotonic() + timeout
            self._changed.notify_all()

    def change_message_visibility(self, **params: Any) -> dict[str, Any]:
        self._validate("ChangeMessageVisibility", params)
        with self._changed:
            queue = self._queue("ChangeMessageVisibility", params["QueueUrl"])
            self._change_visibility("ChangeMessageVisibility", queue, params["ReceiptHandle"], int(params["VisibilityTimeout"]))
        return _ok({})

    def change_message_visibility_batch(self, **params: Any) -> dict[str, Any]:
        self._validate("ChangeMessageVisibilityBatch", params)
        entries = params["Entries"]
        self._check_batch("ChangeMessageVisibilityBatch", entries, "ChangeMessageVisibility")
        successful, failed = [], []
        with self._changed:
            queue = self._queue("ChangeMessageVisibilityBatch", params["QueueUrl"])
            for entry in entries:
                try:
                    timeout = int(entry.get("VisibilityTimeout", 0))
                    self._change_visibility("ChangeMessageVisibilityBatch", queue, entry["ReceiptHandle"], timeout)
                    successful.append({"Id": entry["Id"]})
                except ClientError as err:
                    failed.append(self._failed(entry["Id"], err))
        return _ok({"Successful": successful, "Failed": failed})
