"""What DynamoDB leaves unprocessed in a batch is sent again with backoff (aws.table.retry_unprocessed,
the one loop for BatchWriteItem and BatchGetItem); what it keeps refusing is an error, not a silent loss."""

from __future__ import annotations

from typing import Any

import pytest

from engram.aws import table as table_module
from engram.aws.items import deserialize, serialize
from engram.aws.table import Table


class _Stingy:
    """A DynamoDB client that processes one request item per call."""

    def __init__(self, *, refuse_all: bool = False):
        self.refuse_all = refuse_all
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls = 0

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        ((name, requests),) = RequestItems.items()
        if self.refuse_all:
            return {"UnprocessedItems": RequestItems}
        item = deserialize(requests[0]["PutRequest"]["Item"])
        self.stored[(item["PK"], item["SK"])] = item
        return {"UnprocessedItems": {name: requests[1:]} if requests[1:] else {}}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        ((name, request),) = RequestItems.items()
        first, rest = request["Keys"][0], request["Keys"][1:]
        key = deserialize(first)
        found = [serialize(self.stored[(key["PK"], key["SK"])])]
        return {"Responses": {name: found}, "UnprocessedKeys": {name: {**request, "Keys": rest}} if rest else {}}


@pytest.fixture
def pauses(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(table_module.time, "sleep", slept.append)
    return slept


def test_unprocessed_items_are_sent_again_with_growing_pauses(pauses):
    client = _Stingy()
    table = Table("t", client=client)
    items = [{"PK": "p", "SK": f"s{i}", "n": i} for i in range(4)]
    table.batch_write(puts=items)
    assert sorted(client.stored) == [("p", f"s{i}") for i in range(4)]
    assert pauses == [0.05, 0.1, 0.2]  # three retries, each pause twice the one before
    pauses.clear()
    assert sorted(i["n"] for i in table.get_many([("p", "s0"), ("p", "s1"), ("p", "s2")])) == [0, 1, 2]
    assert pauses == [0.05, 0.1]


def test_items_dynamodb_keeps_refusing_are_an_error(pauses):
    client = _Stingy(refuse_all=True)
    with pytest.raises(RuntimeError, match="1 batch writes unprocessed"):
        Table("t", client=client).batch_write(puts=[{"PK": "p", "SK": "s"}])
    assert client.calls == 10 and pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]  # capped at a second
