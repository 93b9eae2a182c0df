"""Queues (the turn, extraction and run queues of template.yaml) and the SQS calls of the local
workers, on the fake and on moto: FIFO order, dedup, delays, visibility, redrive, draining."""

from __future__ import annotations

import hashlib
import json
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local.apigw import Functions, load_functions
from local.workers import Workers

STUB = """
import json

CALLS = []


def lambda_handler(event, context):
    CALLS.append(event)
    failures = []
    for record in event.get("Records", []):
        body = json.loads(record["body"])
        if body.get("raise"):
            raise RuntimeError("the whole batch fails")
        if body.get("fail"):
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""


@pytest.fixture
def sqs(backend) -> Any:
    return boto3.client("sqs", region_name=backend.resources.region)


@pytest.fixture
def urls(backend) -> dict[str, str]:
    return {logical_id: backend.resources.queue_url(logical_id) for logical_id in backend.resources.queues()}


@pytest.fixture
def functions(backend, tmp_path: Path):
    for folder in ("api", "chat", "extract", "heartbeat"):
        (tmp_path / "functions" / folder).mkdir(parents=True)
        (tmp_path / "functions" / folder / "app.py").write_text(textwrap.dedent(STUB))
    loaded = load_functions(backend.resources.template, tmp_path)
    yield loaded
    loaded.unload()


def _calls(functions: Functions, logical_id: str) -> list[dict[str, Any]]:
    return functions[logical_id].handler().__globals__["CALLS"]  # type: ignore[no-any-return]


def _receive(sqs: Any, url: str, count: int = 10, **extra: Any) -> list[dict[str, Any]]:
    out = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=count,
        WaitTimeSeconds=0,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
        **extra,
    )
    return out.get("Messages", [])  # type: ignore[no-any-return]


def _bodies(messages: list[dict[str, Any]]) -> list[Any]:
    return [json.loads(m["Body"]) for m in messages]


def _depth(sqs: Any, url: str) -> tuple[int, int, int]:
    """(visible, in flight, delayed)."""
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"]),
        int(attrs["ApproximateNumberOfMessagesNotVisible"]),
        int(attrs["ApproximateNumberOfMessagesDelayed"]),
    )


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    for m in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def _code(err: pytest.ExceptionInfo[ClientError]) -> str:
    return str(err.value.response["Error"]["Code"])


# --------------------------------------------------------------------------- queues from the template
def test_the_queues_have_the_templates_attributes(backend, sqs, urls):
    def attrs(logical_id: str) -> dict[str, str]:
        return sqs.get_queue_attributes(QueueUrl=urls[logical_id], AttributeNames=["All"])["Attributes"]  # type: ignore[no-any-return]

    turn, extract, run = attrs("TurnQueue"), attrs("ExtractQueue"), attrs("RunQueue")
    assert urls["TurnQueue"] == "https://sqs.us-east-1.amazonaws.com/123456789012/engram-local-turn-queue.fifo"
    assert (turn["FifoQueue"], turn["ContentBasedDeduplication"], turn["VisibilityTimeout"]) == ("true", "false", "5400")
    assert (
        turn["QueueArn"]
        == backend.resources.queue_arn("TurnQueue")
        == "arn:aws:sqs:us-east-1:123456789012:engram-local-turn-queue.fifo"
    )
    assert json.loads(turn["RedrivePolicy"]) == {
        "deadLetterTargetArn": backend.resources.queue_arn("TurnDLQ"),
        "maxReceiveCount": 3,
    }
    assert "FifoQueue" not in extract and extract["VisibilityTimeout"] == "360" and run["VisibilityTimeout"] == "3600"
    assert json.loads(run["RedrivePolicy"])["deadLetterTargetArn"] == backend.resources.queue_arn("RunDLQ")
    assert attrs("TurnDLQ")["MessageRetentionPeriod"] == "1209600" and attrs("TurnDLQ")["FifoQueue"] == "true"
    assert all(attrs(q)["SqsManagedSseEnabled"] == "true" for q in urls)
    assert (extract["DelaySeconds"], extract["ApproximateNumberOfMessages"]) == ("0", "0")
    assert sqs.get_queue_url(QueueName="engram-local-extract-queue")["QueueUrl"] == urls["ExtractQueue"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="engram-local-no-such-queue")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=urls["TurnQueue"])


# --------------------------------------------------------------------------- what Queues sends
def test_a_turn_is_delivered_with_its_fifo_attributes(backend, sqs, urls):
    backend.stores.queues.enqueue_turn({"n": 1}, group="t#a1#s1", dedup_id="turn-1")
    (message,) = _receive(sqs, urls["TurnQueue"])
    assert json.loads(message["Body"]) == {"n": 1}
    assert message["MD5OfBody"] == hashlib.md5(message["Body"].encode()).hexdigest()
    attrs = message["Attributes"]
    assert (attrs["MessageGroupId"], attrs["MessageDeduplicationId"], attrs["ApproximateReceiveCount"]) == (
        "t#a1#s1",
        "turn-1",
        "1",
    )
    assert attrs["SequenceNumber"].isdigit() and attrs["SenderId"]
    assert abs(int(attrs["SentTimestamp"]) / 1000 - time.time()) < 60
    assert int(attrs["ApproximateFirstReceiveTimestamp"]) >= int(attrs["SentTimestamp"])


def test_a_session_group_is_delivered_in_order_one_in_flight_at_a_time(backend, sqs, urls):
    queues, url = backend.stores.queues, urls["TurnQueue"]
    queues.enqueue_turn({"n": 1}, group="g1", dedup_id="1")
    queues.enqueue_turn({"n": 2}, group="g1", dedup_id="2")
    queues.enqueue_turn({"n": 3}, group="g2", dedup_id="3")
    first = _receive(sqs, url, 1)
    assert _bodies(first) == [{"n": 1}]
    second = _receive(sqs, url)
    assert _bodies(second) == [{"n": 3}]  # n=2 waits while n=1 of its group is in flight
    assert _receive(sqs, url) == []
    _delete(sqs, url, first)
    assert _bodies(_receive(sqs, url)) == [{"n": 2}]


def test_order_within_a_group_is_kept_across_receives(backend, sqs, urls):
    url = urls["TurnQueue"]
    for n in range(7):
        backend.stores.queues.enqueue_turn({"n": n}, group="g", dedup_id=f"d{n}")
    seen: list[int] = []
    while batch := _receive(sqs, url, 3):
        seen += [b["n"] for b in _bodies(batch)]
        _delete(sqs, url, batch)
    assert seen == list(range(7))


def test_the_same_deduplication_id_is_delivered_once(backend, sqs, urls):
    queues = backend.stores.queues
    queues.enqueue_turn({"n": 1}, group="g", dedup_id="same")
    queues.enqueue_turn({"n": 1, "again": True}, group="g", dedup_id="same")
    queues.enqueue_turn({"n": 1}, group="g", dedup_id="other")  # same body, other id: not a duplicate
    assert _depth(sqs, urls["TurnQueue"]) == (2, 0, 0)
    assert _bodies(_receive(sqs, urls["TurnQueue"])) == [{"n": 1}, {"n": 1}]


def test_an_extraction_job_goes_to_the_standard_queue(backend, sqs, urls):
    backend.stores.queues.enqueue_extraction({"runId": "r1", "messages": ["é"]})
    (message,) = _receive(sqs, urls["ExtractQueue"])
    assert json.loads(message["Body"]) == {"runId": "r1", "messages": ["é"]}
    assert not {"MessageGroupId", "SequenceNumber", "MessageDeduplicationId"} & message["Attributes"].keys()


def test_a_delayed_run_is_not_visible_before_its_time(backend, sqs, urls):
    url = urls["RunQueue"]
    backend.stores.queues.enqueue_run({"runId": "later"}, delay_s=30)
    assert _receive(sqs, url) == []
    assert _depth(sqs, url) == (0, 0, 1)
    backend.stores.queues.enqueue_run({"runId": "now"})
    assert _bodies(_receive(sqs, url)) == [{"runId": "now"}]
    assert _depth(sqs, url) == (0, 1, 1)


def test_fifo_sends_need_a_group_a_dedup_id_and_no_delay(sqs, urls):
    url = urls["TurnQueue"]
    with pytest.raises(ClientError) as err:
        sqs.send_message(QueueUrl=url, MessageBody="{}", MessageDeduplicationId="d")
    assert _code(err) == "MissingParameter"
    with pytest.raises(ClientError) as err:
        sqs.send_message(QueueUrl=url, MessageBody="{}", MessageGroupId="g")  # no content-based dedup
    assert _code(err) == "InvalidParameterValue"
    with pytest.raises(ClientError) as err:
        sqs.send_message(QueueUrl=url, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="d", DelaySeconds=5)
    assert _code(err) == "InvalidParameterValue"
    assert _depth(sqs, url) == (0, 0, 0)


def test_message_attributes_round_trip_with_their_md5(sqs, urls):
    url = urls["ExtractQueue"]
    attributes = {"k": {"DataType": "String", "StringValue": "v"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="a1", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == "0a77b0642718c3d9dd47090567d11e0d"  # SQS's algorithm
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"a1").hexdigest()
    (message,) = _receive(sqs, url)
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"] and message["MessageId"] == sent["MessageId"]


def test_a_batch_send_reports_each_entry(sqs, urls):
    url = urls["ExtractQueue"]
    out = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"e{i}", "MessageBody": json.dumps({"i": i})} for i in range(3)])
    assert sorted(e["Id"] for e in out["Successful"]) == ["e0", "e1", "e2"] and not out.get("Failed")
    assert sorted(b["i"] for b in _bodies(_receive(sqs, url))) == [0, 1, 2]


# --------------------------------------------------------------------------- visibility and redrive
def test_a_received_message_is_in_flight_until_its_visibility_ends(backend, sqs, urls):
    url = urls["ExtractQueue"]
    backend.stores.queues.enqueue_extraction({"n": 1})
    (first,) = _receive(sqs, url)
    assert _depth(sqs, url) == (0, 1, 0)
    assert _receive(sqs, url) == []
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    assert _depth(sqs, url) == (1, 0, 0)
    (again,) = _receive(sqs, url)
    assert again["MessageId"] == first["MessageId"] and again["ReceiptHandle"] != first["ReceiptHandle"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    assert _receive(sqs, url, VisibilityTimeout=0) == []  # still in flight from the second receive


@pytest.mark.parametrize(("queue", "dlq"), [("TurnQueue", "TurnDLQ"), ("ExtractQueue", "ExtractDLQ"), ("RunQueue", "RunDLQ")])
def test_a_message_moves_to_the_dlq_after_max_receive_count_receives(sqs, urls, queue, dlq):
    extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if queue == "TurnQueue" else {}
    sent = sqs.send_message(QueueUrl=urls[queue], MessageBody='{"poison":true}', **extra)
    for attempt in (1, 2, 3):  # the template's maxReceiveCount
        (message,) = _receive(sqs, urls[queue])
        assert message["Attributes"]["ApproximateReceiveCount"] == str(attempt)
        sqs.change_message_visibility(QueueUrl=urls[queue], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    assert _receive(sqs, urls[queue]) == []  # a 4th receive moves it instead
    assert _depth(sqs, urls[queue]) == (0, 0, 0)
    (dead,) = _receive(sqs, urls[dlq])
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], '{"poison":true}')
    if queue == "TurnQueue":
        assert dead["Attributes"]["MessageGroupId"] == "g"


def test_delete_takes_the_latest_receipt_handle(backend, sqs, urls):
    url = urls["ExtractQueue"]
    backend.stores.queues.enqueue_extraction({"n": 1})
    (message,) = _receive(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert _depth(sqs, url) == (0, 0, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])  # again: not an error
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as err:
        sqs.delete_message(QueueUrl=url + "-gone", ReceiptHandle=message["ReceiptHandle"])
    assert _code(err) == "AWS.SimpleQueueService.NonExistentQueue"


def test_batch_deletes_and_visibility_changes_report_each_entry(backend, sqs, urls):
    url = urls["ExtractQueue"]
    for n in (1, 2):
        backend.stores.queues.enqueue_extraction({"n": n})
    first, second = _receive(sqs, url)
    out = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "0", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "1", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 0},
        ],
    )
    assert [e["Id"] for e in out["Successful"]] == ["0"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in out["Failed"]] == [("1", "ReceiptHandleIsInvalid", True)]
    assert _depth(sqs, url) == (1, 1, 0)
    out = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "a", "ReceiptHandle": second["ReceiptHandle"]}, {"Id": "b", "ReceiptHandle": "not-a-handle"}],
    )
    assert [e["Id"] for e in out["Successful"]] == ["a"]
    assert [(e["Id"], e["Code"]) for e in out["Failed"]] == [("b", "ReceiptHandleIsInvalid")]
    assert _depth(sqs, url) == (1, 0, 0)


def test_purge_empties_a_queue_once_a_minute(backend, sqs, urls):
    url = urls["ExtractQueue"]
    backend.stores.queues.enqueue_extraction({"n": 1})
    sqs.purge_queue(QueueUrl=url)
    assert _depth(sqs, url) == (0, 0, 0)
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress):
        sqs.purge_queue(QueueUrl=url)


def test_a_long_poll_returns_a_message_sent_while_it_waits(sqs, urls):
    url = urls["ExtractQueue"]
    sender = threading.Timer(0.2, lambda: sqs.send_message(QueueUrl=url, MessageBody='{"late":true}'))
    started = time.monotonic()
    sender.start()
    try:
        out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=5)
    finally:
        sender.join()
    assert _bodies(out["Messages"]) == [{"late": True}]
    assert time.monotonic() - started < 3


# --------------------------------------------------------------------------- the local event source mappings
def test_workers_delete_successes_and_redrive_failures(backend, sqs, urls, functions):
    for n, group in ((1, "g1"), (2, "g1"), (3, "g1"), (4, "g2")):
        body = {"n": n, "fail": n == 2}
        sqs.send_message(
            QueueUrl=urls["TurnQueue"], MessageBody=json.dumps(body), MessageGroupId=group, MessageDeduplicationId=f"d{n}"
        )
    handled = Workers(functions, backend.resources, retry_delay=0).drain("TurnQueue", timeout=30)

    records = [r for event in _calls(functions, "ChatFunction") for r in event["Records"]]
    assert handled == len(records) and all(len(e["Records"]) <= 5 for e in _calls(functions, "ChatFunction"))
    first = records[0]
    assert first["eventSourceARN"] == backend.resources.queue_arn("TurnQueue") and first["awsRegion"] == "us-east-1"
    assert {"MessageGroupId", "MessageDeduplicationId", "SequenceNumber", "ApproximateReceiveCount", "SentTimestamp"} <= first[
        "attributes"
    ].keys()
    counts: dict[int, list[int]] = {}
    for r in records:
        counts.setdefault(json.loads(r["body"])["n"], []).append(int(r["attributes"]["ApproximateReceiveCount"]))
    assert counts == {1: [1], 2: [1, 2, 3], 3: [1], 4: [1]}
    assert _depth(sqs, urls["TurnQueue"]) == (0, 0, 0)
    assert [b["n"] for b in _bodies(_receive(sqs, urls["TurnDLQ"]))] == [2]


def test_workers_fail_the_batch_on_an_exception_one_turn_a_batch(backend, sqs, urls, functions):
    # The turn queue's batches hold one turn (ST7): the one that raises is retried to the DLQ alone.
    for n in (1, 2):
        sqs.send_message(
            QueueUrl=urls["TurnQueue"],
            MessageBody=json.dumps({"n": n, "raise": n == 2}),
            MessageGroupId="g",
            MessageDeduplicationId=f"d{n}",
        )
    Workers(functions, backend.resources, retry_delay=0).drain("TurnQueue", timeout=30)
    counts = {
        json.loads(r["body"])["n"]: int(r["attributes"]["ApproximateReceiveCount"])
        for e in _calls(functions, "ChatFunction")
        for r in e["Records"]
    }
    assert counts == {1: 1, 2: 3}
    assert sorted(b["n"] for b in _bodies(_receive(sqs, urls["TurnDLQ"]))) == [2]


def test_workers_drain_the_extraction_and_run_queues_one_record_at_a_time(backend, functions):
    for n in range(3):
        backend.stores.queues.enqueue_extraction({"n": n})
        backend.stores.queues.enqueue_run({"n": n})
    workers = Workers(functions, backend.resources, retry_delay=0)
    assert workers.drain("ExtractQueue", timeout=30) == 3 and workers.drain("RunQueue", timeout=30) == 3
    for logical_id in ("ExtractFunction", "HeartbeatFunction"):
        events = _calls(functions, logical_id)
        assert [len(e["Records"]) for e in events] == [1, 1, 1]
        assert sorted(json.loads(e["Records"][0]["body"])["n"] for e in events) == [0, 1, 2]
    assert workers.queue_depth("ExtractQueue") == workers.queue_depth("RunQueue") == 0


def test_background_workers_poll_from_threads(backend, functions):
    workers = Workers(functions, backend.resources, retry_delay=0, wait_seconds=1)
    workers.start()
    try:
        for n in range(3):
            backend.stores.queues.enqueue_turn({"n": n}, group=f"g{n % 2}", dedup_id=f"d{n}")
        deadline = time.monotonic() + 10
        while workers.queue_depth("TurnQueue") and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        workers.stop()
    bodies = [json.loads(r["body"])["n"] for e in _calls(functions, "ChatFunction") for r in e["Records"]]
    assert sorted(bodies) == [0, 1, 2] and workers.queue_depth("TurnQueue") == 0
