"""local/emulator.py: moto's TransactWriteItems and Query, bounded, answer exactly as moto's own.

Each scenario runs twice on a fresh moto account, once with moto's implementation and once with
the emulator's, through boto3; the error (code, message, cancellation reasons) and the table's
items and stream records afterwards must be the same. Then what the change is for: nothing a
transaction or a query copies stays alive.
"""

from __future__ import annotations

import gc
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

from local.emulator import patch_moto

patch_moto()
TABLE = "t"


@contextmanager
def moto_account(implementation: str, stream: bool = False) -> Iterator[Any]:
    """A fresh moto account with one table (PK, SK, GSI1 on GSI1PK/GSI1SK); `implementation` is
    "moto" (moto's own transact_write_items and query) or "local" (the emulator's)."""
    patched = {"transact_write_items": DynamoDBBackend.transact_write_items, "query": Table.query, "project": Item.project}
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        if implementation == "moto":
            mp.setattr(DynamoDBBackend, "transact_write_items", patched["transact_write_items"].__wrapped__)
            mp.setattr(Table, "query", patched["query"].__wrapped__)
            mp.setattr(Item, "project", patched["project"].__wrapped__)
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        keys = [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "GSI1PK", "GSI1SK")]
        extra: dict[str, Any] = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}}
        ddb.create_table(
            TableName=TABLE,
            AttributeDefinitions=keys,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "GSI1",
                    "KeySchema": [
                        {"AttributeName": "GSI1PK", "KeyType": "HASH"},
                        {"AttributeName": "GSI1SK", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
            **(extra if stream else {}),
        )
        yield ddb


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"PK": s(pk), "SK": s(sk)}


def put(pk: str, sk: str, **attrs: Any) -> dict[str, Any]:
    return {"Put": {"TableName": TABLE, "Item": {**key(pk, sk), **attrs}}}


SEED = [
    {**key("A", "1"), "n": {"N": "1"}, "text": s("one"), "GSI1PK": s("g"), "GSI1SK": s("1")},
    {**key("A", "2"), "n": {"N": "2"}, "text": s("two")},
    {**key("B", "1"), "n": {"N": "3"}, "GSI1PK": s("g"), "GSI1SK": s("2")},
]

# Transactions, each on the seeded table. Conditions fail at the start, middle and end, with and
# without ALL_OLD, on present and absent items; updates create items and partitions; errors other
# than a condition (a bad update, an oversized item) cancel too; validation errors roll back.
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "all apply": [
        put("C", "1", text=s("new"), GSI1PK=s("g"), GSI1SK=s("3")),
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("A", "1"),
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": key("A", "2"), "ConditionExpression": "attribute_exists(PK)"}},
        {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": key("B", "1"),
                "ConditionExpression": "n = :three",
                "ExpressionAttributeValues": {":three": {"N": "3"}},
            }
        },
    ],
    "condition fails in the middle, ALL_OLD": [
        put("A", "3", text=s("x")),
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("A", "1"),
                "UpdateExpression": "SET #t = :t",
                "ExpressionAttributeNames": {"#t": "text"},
                "ExpressionAttributeValues": {":t": s("changed")},
            }
        },
        {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": key("B", "1"),
                "ConditionExpression": "n = :nine",
                "ExpressionAttributeValues": {":nine": {"N": "9"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {"Delete": {"TableName": TABLE, "Key": key("A", "2")}},
        put("D", "1", text=s("new partition")),
    ],
    "condition fails on an absent item, ALL_OLD": [
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("Z", "9"),
                "UpdateExpression": "SET v = :v",
                "ConditionExpression": "attribute_exists(PK)",
                "ExpressionAttributeValues": {":v": s("v")},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        put("A", "1", text=s("replaced")),
    ],
    "put over an existing item fails its condition last": [
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("E", "1"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": s("created by an update")},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": key("B", "1")}},
        {
            "Put": {
                "TableName": TABLE,
                "Item": {**key("A", "1"), "text": s("again")},
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        },
    ],
    "two failures": [
        {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": key("A", "1"),
                "ConditionExpression": "attribute_not_exists(PK)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        put("F", "1"),
        {
            "Delete": {
                "TableName": TABLE,
                "Key": key("A", "2"),
                "ConditionExpression": "n = :n",
                "ExpressionAttributeValues": {":n": {"N": "5"}},
            }
        },
    ],
    "an update that cannot apply": [
        put("G", "1"),
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("A", "1"),
                "UpdateExpression": "ADD #t :one",
                "ExpressionAttributeNames": {"#t": "text"},
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ],
    "an item over 400 KB": [
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("A", "2"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": s("kept?")},
            }
        },
        put("H", "1", big=s("x" * 410_000)),
    ],
    "two operations on one item (validation error)": [
        put("I", "1"),
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("A", "1"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": s("v")},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": key("I", "1")}},
    ],
    "a key without its range key (validation error)": [
        put("J", "1"),
        {"Delete": {"TableName": TABLE, "Key": {"PK": s("A")}}},
    ],
    "an unknown table": [
        put("K", "1"),
        {"Delete": {"TableName": "nope", "Key": key("A", "1")}},
    ],
    "101 operations": [put("L", f"{i:03d}") for i in range(101)],
    "100 operations": [put("M", f"{i:03d}") for i in range(100)],
}


def stream_records() -> list[Any]:
    """(event, keys, sequence number) of the table's stream records, read from the backend."""
    shard = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE].stream_shard
    records = [r.record for r in shard.items] if shard is not None else []
    return [(r["eventName"], r["dynamodb"]["Keys"], r["dynamodb"]["SequenceNumber"]) for r in records]


def outcome(implementation: str, transaction: list[dict[str, Any]] | None, stream: bool = False) -> dict[str, Any]:
    with moto_account(implementation, stream=stream) as ddb:
        for item in SEED:
            ddb.put_item(TableName=TABLE, Item=item)
        error: Any = None
        try:
            if transaction is not None:
                ddb.transact_write_items(TransactItems=transaction)
        except ClientError as err:
            error = (err.response["Error"], err.response.get("CancellationReasons"))
        items = sorted(ddb.scan(TableName=TABLE)["Items"], key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        return {"error": error, "items": items, "stream": stream_records()}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_transaction_answers_and_leaves_the_table_as_moto_does(name):
    local = outcome("local", SCENARIOS[name])
    assert local == outcome("moto", SCENARIOS[name])
    if name.startswith("all") or name.startswith("100"):
        assert local["error"] is None
    else:
        assert local["error"] is not None and local["items"] == outcome("local", None)["items"]  # nothing applied


@pytest.mark.parametrize(
    "name", ["all apply", "condition fails in the middle, ALL_OLD", "two operations on one item (validation error)"]
)
def test_a_cancelled_transaction_leaves_no_stream_records(name):
    local = outcome("local", SCENARIOS[name], stream=True)
    assert local == outcome("moto", SCENARIOS[name], stream=True)
    assert len(local["stream"]) == len(SEED) + (4 - 1 if name == "all apply" else 0)  # a ConditionCheck writes nothing


def random_items(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items = []
    for i in range(120):
        item = {**key(f"P{rng.randrange(6)}", f"{rng.randrange(1000):04d}#{i}"), "n": {"N": str(rng.randrange(50))}}
        if rng.random() < 0.5:  # attributes of every kind for projections (8)
            item.update(
                kind=rng.choice([s("é✓"), {"BOOL": True}, {"NULL": True}, {"N": "-12.500"}, {"B": b"\x00\xff"}]),
                tags={"L": [s("x"), {"N": "2"}, {"M": {"y": {"SS": ["a", "b"]}}}]},
                deep={"M": {"inner": {"NS": ["1", "2.5"]}, "other": s("o")}},
            )
        if rng.random() < 0.7:  # the rest are not in the index
            item.update(GSI1PK=s(f"G{rng.randrange(3)}"), GSI1SK=s(f"{rng.randrange(100):03d}"))
        items.append(item)
    return items


QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {":p": s("P1")}},
    {"KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {":p": s("P2")}, "ScanIndexForward": False, "Limit": 4},
    {"KeyConditionExpression": "PK = :p AND begins_with(SK, :b)", "ExpressionAttributeValues": {":p": s("P3"), ":b": s("0")}},
    {
        "KeyConditionExpression": "PK = :p AND SK BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": s("P0"), ":a": s("0200"), ":b": s("0700")},
        "Limit": 3,
    },
    {
        "KeyConditionExpression": "PK = :p",
        "FilterExpression": "n > :n",
        "ExpressionAttributeValues": {":p": s("P4"), ":n": {"N": "20"}},
        "Limit": 5,
    },
    {"KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {":p": s("nobody")}},
    # Range conditions: the emulator bisects the sorted partition or index bucket to the slice they
    # can match (with the item past each end, which moto looks at to decide on LastEvaluatedKey).
    {"KeyConditionExpression": "PK = :p AND SK < :k", "ExpressionAttributeValues": {":p": s("P1"), ":k": s("0500")}, "Limit": 2},
    {"KeyConditionExpression": "PK = :p AND SK <= :k", "ExpressionAttributeValues": {":p": s("P2"), ":k": s("0300")}},
    {
        "KeyConditionExpression": "PK = :p AND SK >= :k",
        "ExpressionAttributeValues": {":p": s("P5"), ":k": s("0400")},
        "ScanIndexForward": False,
        "Limit": 3,
    },
    {"KeyConditionExpression": "PK = :p AND SK > :k", "ExpressionAttributeValues": {":p": s("P0"), ":k": s("9")}},
    {"KeyConditionExpression": "PK = :p AND SK = :k", "ExpressionAttributeValues": {":p": s("P3"), ":k": s("nothing")}},
    {
        "KeyConditionExpression": "PK = :p AND begins_with(SK, :b)",
        "ExpressionAttributeValues": {":p": s("P4"), ":b": s("05")},
        "ScanIndexForward": False,
        "Limit": 2,
    },
    {"IndexName": "GSI1", "KeyConditionExpression": "GSI1PK = :g", "ExpressionAttributeValues": {":g": s("G0")}},
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g",
        "ExpressionAttributeValues": {":g": s("G1")},
        "ScanIndexForward": False,
        "Limit": 7,
    },
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g AND GSI1SK > :k",
        "ExpressionAttributeValues": {":g": s("G2"), ":k": s("050")},
        "Limit": 4,
    },
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g AND GSI1SK BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":g": s("G0"), ":a": s("020"), ":b": s("060")},
        "ScanIndexForward": False,
        "Limit": 3,
    },
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g AND begins_with(GSI1SK, :b)",
        "ExpressionAttributeValues": {":g": s("G1"), ":b": s("0")},
        "Limit": 5,
    },
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g AND GSI1SK <= :k",
        "ExpressionAttributeValues": {":g": s("G2"), ":k": s("040")},
    },
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g",
        "FilterExpression": "n < :n",
        "ProjectionExpression": "PK, n",
        "ExpressionAttributeValues": {":g": s("G0"), ":n": {"N": "25"}},
        "Limit": 6,
    },
    # (8) top-level names by placeholder, absent from some items or from all; and a
    # nested path and a list element, which take moto's own path
    {
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :g",
        "ProjectionExpression": "#a, #b, GSI1SK, nowhere",
        "ExpressionAttributeNames": {"#a": "kind", "#b": "tags"},
        "ExpressionAttributeValues": {":g": s("G1")},
        "Limit": 9,
    },
    {
        "KeyConditionExpression": "PK = :p",
        "ProjectionExpression": "SK, deep.inner, tags[1], n",
        "ExpressionAttributeValues": {":p": s("P2")},
    },
]


def all_pages(ddb: Any, query: dict[str, Any]) -> list[Any]:
    pages, start = [], None
    while True:
        page = ddb.query(TableName=TABLE, **query, **({"ExclusiveStartKey": start} if start else {}))
        pages.append((page["Items"], page["Count"], page["ScannedCount"], page.get("LastEvaluatedKey")))
        start = page.get("LastEvaluatedKey")
        if not start:
            return pages


@pytest.mark.parametrize("seed", [1, 2])
def test_queries_page_through_the_same_items_as_moto(seed):
    answers: dict[str, list[Any]] = {}
    for implementation in ("moto", "local"):
        with moto_account(implementation) as ddb:
            for item in random_items(seed):
                ddb.put_item(TableName=TABLE, Item=item)
            answers[implementation] = [all_pages(ddb, q) for q in QUERIES]
    assert answers["local"] == answers["moto"]
    assert sum(len(p[0]) for pages in answers["local"] for p in pages) > 100


def live(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_transactions_and_queries_copy_nothing_that_stays():
    with moto_account("local") as ddb:
        for i in range(200):
            ddb.put_item(TableName=TABLE, Item={**key(f"P{i % 5}", f"{i:04d}"), "GSI1PK": s("g"), "GSI1SK": s(f"{i:04d}")})
        tables, items = live(Table), live(Item)
        for i in range(30):
            transaction = [
                put("T", f"{i}"),
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": key("P0", "0000"),
                        "UpdateExpression": "ADD n :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ]
            ddb.transact_write_items(TransactItems=transaction)
            with pytest.raises(ClientError):
                ddb.transact_write_items(
                    TransactItems=[
                        put("X", f"{i}"),
                        {
                            "ConditionCheck": {
                                "TableName": TABLE,
                                "Key": key("P1", "0001"),
                                "ConditionExpression": "attribute_not_exists(PK)",
                            }
                        },
                    ]
                )
            ddb.query(
                TableName=TABLE, IndexName="GSI1", KeyConditionExpression="GSI1PK = :g", ExpressionAttributeValues={":g": s("g")}
            )
        # moto's copies of the table per transaction, and its registry of every item it ever made, are gone
        assert live(Table) == tables
        assert live(Item) == items + 30  # the 30 puts of T
        assert not Table.instances_tracked and not Item.instances_tracked


def test_patch_moto_is_idempotent():
    before: Callable[..., Any] = DynamoDBBackend.transact_write_items
    query = Table.query
    patch_moto()
    assert DynamoDBBackend.transact_write_items is before and Table.query is query


def _write_steps(seed: int) -> list[tuple[str, Any]]:
    """A random mix of every kind of write, and index queries between them."""
    rng = random.Random(seed)
    steps: list[tuple[str, Any]] = []
    for i in range(160):
        pk, sk = f"P{rng.randrange(5)}", f"{rng.randrange(40):03d}"
        roll = rng.random()
        if roll < 0.3:
            steps.append(("put", {**key(pk, sk), "GSI1PK": s(f"G{rng.randrange(3)}"), "GSI1SK": s(f"{i:03d}")}))
        elif roll < 0.45:
            steps.append(("move", (key(pk, sk), f"G{rng.randrange(3)}")))
        elif roll < 0.55:
            steps.append(("unindex", key(pk, sk)))
        elif roll < 0.65:
            steps.append(("delete", key(pk, sk)))
        elif roll < 0.75:
            batch = [{**key(f"B{rng.randrange(3)}", f"{i}-{j}"), "GSI1PK": s("G1"), "GSI1SK": s(f"{j}")} for j in range(3)]
            steps.append(("batch", batch))
        elif roll < 0.85:
            condition = "attribute_exists(PK)" if rng.random() < 0.5 else "attribute_not_exists(PK)"  # cancels or applies
            check = {"ConditionCheck": {"TableName": TABLE, "Key": key("nobody", "x"), "ConditionExpression": condition}}
            steps.append(("transact", [put(pk, sk, GSI1PK=s("G2"), GSI1SK=s(f"t{i}")), check]))
        elif roll < 0.9:
            steps.append(("conditional", {**key(pk, sk), "GSI1PK": s("G0"), "GSI1SK": s("c")}))
        else:
            steps.append(("query", None))
    return steps


WRITES: dict[str, Callable[[Any, Any], Any]] = {
    "put": lambda ddb, item: ddb.put_item(TableName=TABLE, Item=item),
    "move": lambda ddb, arg: ddb.update_item(
        TableName=TABLE,
        Key=arg[0],
        UpdateExpression="SET GSI1PK = :g, GSI1SK = :k",
        ExpressionAttributeValues={":g": s(arg[1]), ":k": s("moved")},
    ),
    "unindex": lambda ddb, k: ddb.update_item(TableName=TABLE, Key=k, UpdateExpression="REMOVE GSI1PK"),
    "delete": lambda ddb, k: ddb.delete_item(TableName=TABLE, Key=k),
    "batch": lambda ddb, items: ddb.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in items]}),
    "transact": lambda ddb, ops: ddb.transact_write_items(TransactItems=ops),
    "conditional": lambda ddb, item: ddb.put_item(TableName=TABLE, Item=item, ConditionExpression="attribute_not_exists(PK)"),
    "query": lambda ddb, _: None,
}


def _play(ddb: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    """Every step, and after each the three index keys' answers (or the step's error code)."""
    seen: list[Any] = []
    for kind, arg in steps:
        try:
            WRITES[kind](ddb, arg)
        except ClientError as err:
            seen.append(err.response["Error"]["Code"])
        for g in ("G0", "G1", "G2"):
            query = {"IndexName": "GSI1", "KeyConditionExpression": "GSI1PK = :g", "ExpressionAttributeValues": {":g": s(g)}}
            seen.append(all_pages(ddb, query))
        for p in ("P0", "P1", "B1"):  # table queries with a range condition: the partition's kept order
            query = {"KeyConditionExpression": "PK = :p AND SK >= :k", "ExpressionAttributeValues": {":p": s(p), ":k": s("010")}}
            seen.append(all_pages(ddb, query))
    return seen


def test_index_queries_stay_right_through_every_kind_of_write():
    """The emulator's index map (and each partition's kept order) is brought up to date after each
    write request: puts, updates that move an item to another index key or out of the index,
    deletes, batch writes, cancelled and applied transactions, failed conditional writes. Every
    index query and every table query with a range condition answers as moto's own."""
    steps = _write_steps(7)
    answers = {}
    for implementation in ("moto", "local"):
        with moto_account(implementation) as ddb:
            answers[implementation] = _play(ddb, steps)
    assert answers["local"] == answers["moto"]
    assert "TransactionCanceledException" in answers["local"] and "ConditionalCheckFailedException" in answers["local"]


def test_item_answers_are_the_bytes_moto_would_write():
    """(6) Query, Scan, GetItem, BatchGetItem, UpdateItem and PutItem answers (every ReturnValues;
    not DeleteItem, whose result carries a member its answer has not), written directly as JSON,
    carry the same status, content type and parsed body as moto's serializer writes, for every
    attribute type."""
    from moto.dynamodb.responses import DynamoHandler

    answers: list[tuple[str, Any, Any]] = []
    fast = DynamoHandler.serialized

    def both(self: Any, action_result: Any) -> Any:
        mine = fast(self, action_result)
        answers.append((self._get_action(), mine, fast.__wrapped__(self, action_result)))  # type: ignore[attr-defined]
        return mine

    item = {
        "PK": {"S": "p#1"},
        "SK": {"S": "s#é✓"},
        "n": {"N": "-12.500"},
        "big": {"N": "123456789012345678901234567890"},
        "b": {"B": b"\x00\xff\x10"},
        "bs": {"BS": [b"\x01", b"\x02"]},
        "ns": {"NS": ["1", "2.5"]},
        "ss": {"SS": ["a", "ü"]},
        "l": {"L": [{"S": "x"}, {"N": "2"}, {"M": {"deep": {"NULL": True}}}]},
        "m": {"M": {"t": {"BOOL": True}, "f": {"BOOL": False}, "quote": {"S": 'say "hi"\n'}}},
    }
    with pytest.MonkeyPatch.context() as mp, moto_account("local") as client:
        mp.setattr(DynamoHandler, "serialized", both)
        for i in range(3):
            client.put_item(TableName=TABLE, Item={**item, "SK": {"S": f"s#{i}"}})
        client.query(TableName=TABLE, KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "p#1"}}, Limit=2)
        client.scan(TableName=TABLE)
        client.get_item(TableName=TABLE, Key={"PK": {"S": "p#1"}, "SK": {"S": "s#1"}})
        client.get_item(TableName=TABLE, Key={"PK": {"S": "none"}, "SK": {"S": "none"}})
        client.batch_get_item(RequestItems={TABLE: {"Keys": [{"PK": {"S": "p#1"}, "SK": {"S": "s#2"}}]}})
        key = {"PK": {"S": "p#1"}, "SK": {"S": "s#0"}}
        for returns in ("ALL_NEW", "ALL_OLD", "UPDATED_NEW", "UPDATED_OLD", "NONE"):
            client.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET n = :n, ss = :ss",
                ExpressionAttributeValues={":n": {"N": "7"}, ":ss": {"SS": ["z", "é"]}},
                ReturnValues=returns,
            )
        client.put_item(TableName=TABLE, Item={**item, "SK": {"S": "s#1"}}, ReturnValues="ALL_OLD")
        client.delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD")
        client.delete_item(TableName=TABLE, Key=key)
    seen = set()
    actions = ("Query", "Scan", "GetItem", "BatchGetItem", "UpdateItem", "PutItem")
    for action, (status, headers, body), (want_status, want_headers, want_body) in answers:
        if action not in actions:
            continue
        seen.add(action)
        assert status == want_status == 200
        assert headers["Content-Type"] == want_headers["Content-Type"]
        assert json.loads(body) == json.loads(want_body), action
    assert seen == set(actions)


def test_sqs_keeps_a_bounded_number_of_deleted_receipt_handles(monkeypatch):
    """(7) moto kept every receipt handle of every deleted message for as long as the stack ran;
    now each queue keeps its newest DELETED_HANDLES_KEPT, and deleting a recent one again still
    succeeds as in SQS."""
    from moto.sqs.models import sqs_backends

    from local import emulator

    monkeypatch.setattr(emulator, "DELETED_HANDLES_KEPT", 5)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        handles = []
        for i in range(12):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
            (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            handles.append(message["ReceiptHandle"])
        queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues["q"]
        assert len(queue.deleted_messages) == 5
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handles[-1])  # deleted again: fine
        with pytest.raises(ClientError) as refused:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=handles[0])
        assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
