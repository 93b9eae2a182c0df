"""local/stats.py: what `python -m local.stack --stats` reports of the emulator's stored data and
of the calls it served (bench/soak.py reads it to tell stored data from growth that is not)."""

from __future__ import annotations

import gc
import sys

import boto3
from moto import mock_aws

from local import stats
from local.emulator import patch_moto

patch_moto()


def test_deep_size_counts_what_an_object_holds_once():
    shared = "x" * 1000
    item = {"a": shared, "b": [shared, shared], "c": {"d": shared}}
    size = stats.deep_size([item], set())
    assert sys.getsizeof(shared) < size < 2 * sys.getsizeof(shared)  # the string once, plus the containers
    assert stats.deep_size([item, item], set()) == size


def _table(name: str):
    """A DynamoDB client and a PK/SK table `name` in moto (inside mock_aws)."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    keys = [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK")]
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=keys,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb


def test_stored_data_counts_items_by_kind_and_the_index_is_not_data():
    with mock_aws():
        ddb = _table("t")
        for i in range(3):
            ddb.put_item(TableName="t", Item={"PK": {"S": "u#A#a1"}, "SK": {"S": f"RUN#{i}"}, "text": {"S": "y" * 5000}})
        ddb.put_item(TableName="t", Item={"PK": {"S": "u#USAGE"}, "SK": {"S": "2026-01-01T00:00:00Z"}, "expiresAt": {"N": "1"}})
        ddb.query(TableName="t", KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "u#A#a1"}})
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="z" * 2000)
        data = stats.stored_data()
    assert data["dynamodb_items"]["count"] == 4
    assert data["dynamodb RUN"]["count"] == 3 and data["dynamodb RUN"]["bytes"] > 3 * 5000
    assert data["dynamodb USAGE by time"] == {"count": 1, "bytes": data["dynamodb USAGE by time"]["bytes"], "expired": 1}
    assert data["dynamodb_items"]["bytes"] == data["dynamodb RUN"]["bytes"] + data["dynamodb USAGE by time"]["bytes"]
    assert data["sqs_messages"]["count"] == 1 and data["sqs_messages"]["bytes"] > 2000
    # the query built the emulator's index over the table: its containers, not the items again
    assert data["emulator index"]["count"] == 4
    assert 0 < data["emulator index"]["bytes"] < data["dynamodb_items"]["bytes"] / 4


def test_calls_are_counted_per_operation_and_query_shape(monkeypatch):
    from botocore.client import BaseClient
    from moto.core.responses import BaseResponse

    # undone after the test: the timers stay out of the other tests
    monkeypatch.setattr(BaseClient, "_make_api_call", BaseClient._make_api_call)
    monkeypatch.setattr(BaseResponse, "_dispatch", BaseResponse._dispatch)
    monkeypatch.setattr(gc, "callbacks", list(gc.callbacks))
    stats.install()
    before = stats.calls()
    with mock_aws():
        ddb = _table("t")
        for _ in range(2):
            ddb.query(
                TableName="t",
                KeyConditionExpression="PK = :p AND begins_with(SK, :m)",
                ExpressionAttributeValues={":p": {"S": "t#A#ag_1"}, ":m": {"S": "MEM#"}},
            )
    after = stats.calls()

    def count(name: str) -> int:
        return int(after.get(name, {"count": 0})["count"] - before.get(name, {"count": 0})["count"])

    assert count("dynamodb.Query") == 2
    assert count("moto.dynamodb.Query table: PK = :p AND begins_with(SK, :m) [MEM#]") == 2  # the kind, never the id
