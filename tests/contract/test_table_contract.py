"""`engram.aws.table.Table` (the one DynamoDB helper every repository uses) over the table of
template.yaml, on the fake and on moto: what the repositories rely on, as DynamoDB does it.

Where moto disagrees with DynamoDB, the point is left out here (moto 5.2; worth re-checking on upgrades):
- a Query whose Limit is reached exactly on the partition's last item: DynamoDB still returns a
  LastEvaluatedKey (the next page is empty), moto returns none. Paging tests here use counts that
  are not a multiple of the limit.
- comparing values of different types (`a < :v` with a string `a` and a number `:v`): DynamoDB
  evaluates it to false, moto raises a TypeError inside the mock.
- a name placeholder missing from ExpressionAttributeNames, or a value placeholder missing from
  ExpressionAttributeValues in a ConditionExpression: DynamoDB answers ValidationException, moto
  raises a KeyError (a value missing in an UpdateExpression is tested: moto gets that one right).
- an unused ExpressionAttributeValues entry on PutItem: DynamoDB answers ValidationException, moto
  ignores it (the same on UpdateItem is tested).
- BatchWriteItem with a put and a delete of the same key in one batch: DynamoDB answers
  ValidationException ("Provided list of item keys contains duplicates"), moto applies both.
- a number written to a string-typed index key attribute (GSI1PK = 5): DynamoDB answers
  ValidationException, moto stores the item.
- which reasons a transaction whose conditions fail on SEVERAL items reports: only one failing
  condition per transaction is tested.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from engram.aws.table import Cancelled, ConditionFailed, Table
from engram.kernel.errors import BadRequest

P = "tenant-1#A#agent-1"
OTHER = "tenant-2#A#agent-1"


@pytest.fixture
def table(backend) -> Table:
    table: Table = backend.stores.table
    assert table.name == backend.resources.table_name() == backend.settings.table_name
    return table


class _Pages:
    """The table's client with Query pages of at most `size` items, and a count of the calls:
    DynamoDB may end a page before Limit (1 MB read), so callers must follow LastEvaluatedKey."""

    def __init__(self, client: Any, size: int):
        self._client = client
        self.size = size
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def query(self, **kwargs: Any) -> Any:
        self.queries += 1
        kwargs["Limit"] = min(kwargs.get("Limit") or self.size, self.size)
        return self._client.query(**kwargs)


def _small_pages(table: Table, size: int = 2) -> tuple[Table, _Pages]:
    client = _Pages(table.client, size)
    return Table(table.name, client=client), client


def _code(err: pytest.ExceptionInfo[ClientError]) -> str:
    return str(err.value.response["Error"]["Code"])


def _sks(items: list[dict[str, Any]]) -> list[str]:
    return [i["SK"] for i in items]


# --- single items ---------------------------------------------------------------------------------
def test_put_get_and_delete_round_trip(table):
    assert table.get(P, "SESSION#s1") is None
    table.put({"PK": P, "SK": "SESSION#s1", "title": "hello", "messageCount": 3})
    assert table.get(P, "SESSION#s1") == {"PK": P, "SK": "SESSION#s1", "title": "hello", "messageCount": 3}
    assert table.get(OTHER, "SESSION#s1") is None and table.get(P, "SESSION#s2") is None
    table.delete(P, "SESSION#s1")
    assert table.get(P, "SESSION#s1") is None
    table.delete(P, "SESSION#s1")  # deleting a missing item is not an error
    table.delete(P, "never")


def test_a_put_replaces_the_whole_item(table):
    table.put({"PK": P, "SK": "X", "a": 1, "b": 2, "m": {"k": 1}})
    table.put({"PK": P, "SK": "X", "a": 3})
    assert table.get(P, "X") == {"PK": P, "SK": "X", "a": 3}


def test_numbers_maps_lists_and_strings_round_trip_and_none_is_dropped(table):
    item = {
        "PK": P,
        "SK": "VALUES",
        "int": 42,
        "negative": -7,
        "big": 10**30,
        "float": 0.1,
        "cost": 0.00012345,
        "decimal": Decimal("2.50"),
        "whole_float": 3.0,
        "zero": 0,
        "yes": True,
        "no": False,
        "empty": "",
        "unicode": "ünï 😀 <b>",
        "nested": {"list": [1, 2.5, "x", {"deep": [True, None]}], "map": {}, "blank": "", "gone": None},
        "emptyList": [],
        "missing": None,
    }
    table.put(item)
    got = table.get(P, "VALUES")
    assert got == {
        "PK": P,
        "SK": "VALUES",
        "int": 42,
        "negative": -7,
        "big": 10**30,
        "float": 0.1,
        "cost": 0.00012345,
        "decimal": 2.5,
        "whole_float": 3,
        "zero": 0,
        "yes": True,
        "no": False,
        "empty": "",
        "unicode": "ünï 😀 <b>",
        "nested": {"list": [1, 2.5, "x", {"deep": [True, None]}], "map": {}, "blank": ""},
        "emptyList": [],
    }
    assert type(got["int"]) is int and type(got["whole_float"]) is int and type(got["decimal"]) is float
    assert type(got["yes"]) is bool and type(got["zero"]) is int
    assert "missing" not in got and "gone" not in got["nested"]


def test_an_item_over_400_kb_is_rejected(table):
    table.put({"PK": P, "SK": "BIG", "text": "a" * 350_000})  # under the limit
    with pytest.raises(ClientError) as err:
        table.put({"PK": P, "SK": "BIG2", "text": "a" * 410_000})
    assert _code(err) == "ValidationException"
    assert table.get(P, "BIG2") is None
    with pytest.raises(ClientError) as err:
        table.update(P, "BIG", "SET more = :v", values={":v": "b" * 60_000})  # 350 KB + 60 KB
    assert _code(err) == "ValidationException"
    assert set(table.get(P, "BIG") or {}) == {"PK", "SK", "text"}
    with pytest.raises(ClientError) as err:
        table.transact([table.put_op({"PK": P, "SK": "BIG3", "text": "a" * 410_000})])
    assert _code(err) == "ValidationException"
    with pytest.raises(ClientError) as err:
        table.batch_write(puts=[{"PK": P, "SK": "BIG4", "text": "a" * 410_000}])
    assert _code(err) == "ValidationException"
    assert table.get(P, "BIG3") is None and table.get(P, "BIG4") is None


# --- conditions -----------------------------------------------------------------------------------
def test_attribute_not_exists_and_attribute_exists_guard_puts(table):
    table.put({"PK": P, "SK": "WS#w1", "name": "first"}, condition="attribute_not_exists(PK)")
    with pytest.raises(ConditionFailed) as err:
        table.put({"PK": P, "SK": "WS#w1", "name": "second"}, condition="attribute_not_exists(PK)")
    assert err.value.item is None and err.value.codes == []
    assert table.get(P, "WS#w1") == {"PK": P, "SK": "WS#w1", "name": "first"}
    table.put({"PK": P, "SK": "WS#w1", "name": "third"}, condition="attribute_exists(PK)")
    assert (table.get(P, "WS#w1") or {})["name"] == "third"
    with pytest.raises(ConditionFailed):
        table.put({"PK": P, "SK": "WS#w2", "name": "x"}, condition="attribute_exists(PK)")
    assert table.get(P, "WS#w2") is None


def test_attribute_exists_guards_deletes(table):
    with pytest.raises(ConditionFailed) as err:
        table.delete(P, "MEM#m1", condition="attribute_exists(PK)")
    assert err.value.item is None
    table.put({"PK": P, "SK": "MEM#m1"})
    table.delete(P, "MEM#m1", condition="attribute_exists(PK)")
    assert table.get(P, "MEM#m1") is None


def test_comparisons_in_conditions(table):
    table.put({"PK": P, "SK": "C", "n": 5, "s": "2026-01-02T00:00:00.000Z#run_b", "status": "queued"})

    def holds(condition: str, values: dict[str, Any], names: dict[str, str] | None = None) -> bool:
        try:
            table.update(P, "C", "SET touched = :t", condition=condition, names=names, values={**values, ":t": 1})
        except ConditionFailed:
            return False
        return True

    assert holds("n = :v", {":v": 5}) and not holds("n = :v", {":v": 6})
    assert holds("n < :v", {":v": 6}) and not holds("n < :v", {":v": 5}) and not holds("n < :v", {":v": 4})
    assert holds("n <= :v", {":v": 5}) and holds("n > :v", {":v": 4}) and holds("n >= :v", {":v": 5})
    assert holds("n <> :v", {":v": 4}) and not holds("n <> :v", {":v": 5})
    assert holds("absent_attr <> :v", {":v": 5})  # an absent attribute is "not equal" to any value
    assert holds("n < :v", {":v": 10})  # numbers compare as numbers, not as text ("5" > "10")
    # strings compare by their bytes: ISO timestamps sort in time order
    assert holds("s <= :v", {":v": "2026-01-02T00:00:00.000Z#run_b"})
    assert not holds("s <= :v", {":v": "2026-01-01T23:59:59.999Z#run_z"})
    assert holds("s < :v", {":v": "2026-01-02T00:00:00.000Z#run_c"})
    assert holds("#s = :v", {":v": "queued"}, {"#s": "status"})
    # a comparison with a missing attribute is false, whichever the operator
    assert not holds("absent < :v", {":v": 5}) and not holds("absent = :v", {":v": 5}) and not holds("absent > :v", {":v": 5})
    assert holds("attribute_not_exists(absent)", {}) and not holds("attribute_exists(absent)", {})
    assert (table.get(P, "C") or {})["touched"] == 1


def test_and_or_not_and_parentheses(table):
    table.put({"PK": P, "SK": "L", "a": 1, "b": 0, "c": 0})
    one = {":one": 1}

    def holds(condition: str) -> bool:
        try:
            table.update(P, "L", "SET d = :one", condition=condition, values=one)
        except ConditionFailed:
            return False
        return True

    assert holds("a = :one OR b = :one")
    assert not holds("a = :one AND b = :one")
    assert holds("a = :one OR b = :one AND c = :one")  # AND binds tighter than OR
    assert holds("b = :one AND c = :one OR a = :one")
    assert not holds("(a = :one OR b = :one) AND c = :one")
    assert holds("a = :one AND (b = :one OR c <> :one)")
    assert holds("NOT b = :one") and not holds("NOT (a = :one)")
    assert holds("attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :one)")


def test_the_lease_condition_of_the_sessions(table):
    """`attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)`"""
    free = "attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)"

    def take(sk: str, now: int) -> bool:
        try:
            table.update(P, sk, "SET leaseOwner = :run", condition=free, values={":run": "run_1", ":now": now})
        except ConditionFailed:
            return False
        return True

    assert not take("SESSION#missing", 100) and table.get(P, "SESSION#missing") is None
    table.put({"PK": P, "SK": "SESSION#free"})
    table.put({"PK": P, "SK": "SESSION#held", "leaseUntil": 200})
    assert take("SESSION#free", 100)
    assert not take("SESSION#held", 150) and not take("SESSION#held", 200)
    assert take("SESSION#held", 201)


def test_in_condition_with_a_name_placeholder(table):
    condition = "attribute_not_exists(PK) OR #s IN (:queued, :running)"
    names, values = {"#s": "status"}, {":queued": "queued", ":running": "running"}
    table.put({"PK": P, "SK": "RUN#r1", "status": "new"}, condition=condition, names=names, values=values)
    for status in ("queued", "running"):
        table.update(P, "RUN#r1", "SET #s = :v", names=names, values={":v": status})
        table.put({"PK": P, "SK": "RUN#r1", "status": "succeeded"}, condition=condition, names=names, values=values)
    with pytest.raises(ConditionFailed):
        table.put({"PK": P, "SK": "RUN#r1", "status": "failed"}, condition=condition, names=names, values=values)
    assert (table.get(P, "RUN#r1") or {})["status"] == "succeeded"
    table.put({"PK": P, "SK": "RUN#r2"})  # no status at all: IN is false
    with pytest.raises(ConditionFailed):
        table.update(P, "RUN#r2", "SET x = :queued", condition="#s IN (:queued, :running)", names=names, values=values)


# --- update expressions ---------------------------------------------------------------------------
def test_update_sets_several_attributes_and_returns_the_new_item(table):
    table.put({"PK": P, "SK": "U", "keep": "me", "status": "queued"})
    out = table.update(
        P,
        "U",
        "SET #s = :running, claimedUntil = :until, #u = :at",
        condition="#s = :queued",
        names={"#s": "status", "#u": "updatedAt"},
        values={":running": "running", ":queued": "queued", ":until": 123, ":at": "2026-01-01T00:00:00.000Z"},
    )
    expected = {
        "PK": P,
        "SK": "U",
        "keep": "me",
        "status": "running",
        "claimedUntil": 123,
        "updatedAt": "2026-01-01T00:00:00.000Z",
    }
    assert out == expected and table.get(P, "U") == expected


def test_update_of_a_missing_item_creates_it(table):
    out = table.update(P, "NEW", "SET a = :v", values={":v": {"nested": [1, "two"]}})
    assert out == {"PK": P, "SK": "NEW", "a": {"nested": [1, "two"]}}
    assert table.get(P, "NEW") == out


def test_remove_and_set_with_remove(table):
    table.put({"PK": P, "SK": "R", "leaseOwner": "run_1", "leaseUntil": 99, "count": 1})
    out = table.update(P, "R", "REMOVE leaseOwner, leaseUntil", condition="leaseOwner = :run", values={":run": "run_1"})
    assert out == {"PK": P, "SK": "R", "count": 1}
    out = table.update(P, "R", "REMOVE nothing")  # removing a missing attribute is fine
    assert out == {"PK": P, "SK": "R", "count": 1}
    table.update(P, "R", "SET leaseOwner = :run, leaseUntil = :u", values={":run": "run_2", ":u": 5})
    out = table.update(
        P,
        "R",
        "SET #c = :c, updatedAt = :now REMOVE leaseOwner, leaseUntil",
        condition="leaseOwner = :run",
        names={"#c": "count"},
        values={":c": 2, ":now": "t", ":run": "run_2"},
    )
    assert out == {"PK": P, "SK": "R", "count": 2, "updatedAt": "t"}
    with pytest.raises(ConditionFailed):
        table.update(P, "R", "REMOVE #c", condition="leaseOwner = :run", names={"#c": "count"}, values={":run": "run_2"})
    assert (table.get(P, "R") or {})["count"] == 2


def test_if_not_exists_keeps_a_value_that_is_there(table):
    table.put({"PK": P, "SK": "I", "messageCount": 7})
    out = table.update(
        P,
        "I",
        "SET contextFrom = if_not_exists(messageCount, :zero), revisionAtReset = if_not_exists(revision, :zero), "
        "#c = if_not_exists(#c, :created)",
        names={"#c": "createdAt"},
        values={":zero": 0, ":created": "first"},
    )
    assert out == {"PK": P, "SK": "I", "messageCount": 7, "contextFrom": 7, "revisionAtReset": 0, "createdAt": "first"}
    out = table.update(P, "I", "SET #c = if_not_exists(#c, :created)", names={"#c": "createdAt"}, values={":created": "second"})
    assert out["createdAt"] == "first"


def test_add_counts_from_zero_on_a_missing_item_or_attribute(table):
    assert table.update(P, "EXTRACT#r1", "ADD attempts :one", values={":one": 1}) == {"PK": P, "SK": "EXTRACT#r1", "attempts": 1}
    assert table.update(P, "EXTRACT#r1", "ADD attempts :one", values={":one": 1})["attempts"] == 2
    table.put({"PK": P, "SK": "EXTRACT#r2", "status": "running"})
    out = table.update(
        P,
        "EXTRACT#r2",
        "SET #st = :running, runId = :run ADD attempts :one",
        names={"#st": "status"},
        values={":running": "running", ":run": "r2", ":one": 1},
    )
    assert out == {"PK": P, "SK": "EXTRACT#r2", "status": "running", "runId": "r2", "attempts": 1}
    assert table.update(P, "EXTRACT#r2", "ADD attempts :n", values={":n": 5})["attempts"] == 6
    with pytest.raises(ClientError) as err:  # ADD to a string is a type error
        table.update(P, "EXTRACT#r2", "ADD #st :one", names={"#st": "status"}, values={":one": 1})
    assert _code(err) == "ValidationException"


def test_set_fields_changes_an_existing_item_and_refuses_a_missing_one(table):
    table.put({"PK": P, "SK": "AGENT#a1", "name": "old", "schedule": "rate(1 hour)", "team": ["x"]})
    out = table.set_fields(P, "AGENT#a1", {"name": "new", "schedule": None, "team": [], "persona": "p"})
    assert out == {"PK": P, "SK": "AGENT#a1", "name": "new", "team": [], "persona": "p"}
    with pytest.raises(ConditionFailed):
        table.set_fields(P, "AGENT#a2", {"name": "ghost"})
    assert table.get(P, "AGENT#a2") is None


def test_old_on_failure_returns_the_stored_item(table):
    stored = {"PK": P, "SK": "SESSION#s1", "leaseOwner": "run_1", "leaseUntil": 500, "nested": {"a": [1]}}
    table.put(stored)
    condition = "attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)"
    with pytest.raises(ConditionFailed) as err:
        table.update(
            P,
            "SESSION#s1",
            "SET leaseOwner = :run",
            condition=condition,
            values={":run": "run_2", ":now": 10},
            old_on_failure=True,
        )
    assert err.value.item == stored
    with pytest.raises(ConditionFailed) as err:  # without asking, no item
        table.update(P, "SESSION#s1", "SET leaseOwner = :run", condition=condition, values={":run": "run_2", ":now": 10})
    assert err.value.item is None
    with pytest.raises(ConditionFailed) as err:  # no item to return
        table.update(
            P,
            "SESSION#gone",
            "SET leaseOwner = :run",
            condition=condition,
            values={":run": "run_2", ":now": 10},
            old_on_failure=True,
        )
    assert err.value.item is None
    assert table.get(P, "SESSION#gone") is None
    with pytest.raises(ConditionFailed) as err:
        table.delete(P, "SESSION#s1", condition=condition, values={":now": 10}, old_on_failure=True)
    assert err.value.item == stored
    with pytest.raises(ConditionFailed) as err:
        table.delete(P, "SESSION#gone", condition=condition, values={":now": 10}, old_on_failure=True)
    assert err.value.item is None
    assert table.get(P, "SESSION#s1") == stored


def test_malformed_expressions_are_validation_errors_and_change_nothing(table):
    table.put({"PK": P, "SK": "V", "a": 1})
    attempts: list[dict[str, Any]] = [
        {"expression": "SET a = :v", "values": {":v": 2, ":unused": 3}},  # an unused value
        {"expression": "SET a = :v", "names": {"#unused": "b"}, "values": {":v": 2}},  # an unused name
        {"expression": "SET a = :undefined"},  # a value that is not given
        {"expression": "SET a = :v REMOVE a", "values": {":v": 2}},  # two paths on one attribute
        {"expression": "SET PK = :v", "values": {":v": "other"}},  # a key attribute
        {"expression": "SET name = :v", "values": {":v": "x"}},  # a reserved word needs a #name
        {"expression": "SET a = :v", "condition": "attribute_exists(status)", "values": {":v": 2}},
    ]
    for attempt in attempts:
        expression = attempt.pop("expression")
        with pytest.raises(ClientError) as err:
            table.update(P, "V", expression, **attempt)
        assert _code(err) == "ValidationException", expression
    assert (
        table.update(P, "V", "SET #n = :v REMOVE #n2", names={"#n": "name", "#n2": "status"}, values={":v": "x"})["name"] == "x"
    )
    assert table.get(P, "V") == {"PK": P, "SK": "V", "a": 1, "name": "x"}


# --- queries --------------------------------------------------------------------------------------
def _fill(table: Table, pk: str, sks: list[str], **attrs: Any) -> None:
    table.batch_write(puts=[{"PK": pk, "SK": sk, "n": i, **attrs} for i, sk in enumerate(sks)])


def test_query_sorts_by_sort_key_bytes_and_filters_by_prefix(table):
    sks = ["SESSION#b", "SESSION#a", "AGENT#x", "MEM#1", "SESSION#B", "SESSION#a-1", "SESSION#0", "SESSIONS"]
    _fill(table, P, sks)
    _fill(table, OTHER, ["SESSION#a"])
    items, token = table.query(P)
    assert _sks(items) == ["AGENT#x", "MEM#1", "SESSION#0", "SESSION#B", "SESSION#a", "SESSION#a-1", "SESSION#b", "SESSIONS"]
    assert token is None
    items, _ = table.query(P, sk_prefix="SESSION#")
    assert _sks(items) == ["SESSION#0", "SESSION#B", "SESSION#a", "SESSION#a-1", "SESSION#b"]
    items, _ = table.query(P, sk_prefix="SESSION#", newest_first=True)
    assert _sks(items) == ["SESSION#b", "SESSION#a-1", "SESSION#a", "SESSION#B", "SESSION#0"]
    items, _ = table.query(P, sk_after="SESSION#a")
    assert _sks(items) == ["SESSION#a-1", "SESSION#b", "SESSIONS"]
    items, _ = table.query(P, sk_after="SESSION#a", newest_first=True)
    assert _sks(items) == ["SESSIONS", "SESSION#b", "SESSION#a-1"]
    assert table.query(P, sk_prefix="NOPE#") == ([], None)
    assert table.query("tenant-9#A#nobody") == ([], None)
    assert _sks(table.query(OTHER)[0]) == ["SESSION#a"]


def test_query_pages_with_limit_and_tokens(table):
    sks = [f"RUN#{i:02d}" for i in range(7)]
    _fill(table, P, sks)
    _fill(table, P, ["ZZZ"])
    for newest_first, expected in ((False, sks), (True, sks[::-1])):
        seen, pages, token = [], 0, None
        while True:
            items, token = table.query(P, sk_prefix="RUN#", limit=3, token=token, newest_first=newest_first)
            pages += 1
            assert len(items) <= 3
            seen += _sks(items)
            if token is None:
                break
            assert isinstance(token, str)
        assert (seen, pages) == (expected, 3)
    first, token = table.query(P, limit=2)
    again, token_again = table.query(P, limit=2)
    assert (first, token) == (again, token_again)  # a token is a plain function of the last key
    items, _ = table.query(P, limit=2, token=token)
    assert _sks(items) == ["RUN#02", "RUN#03"]


def test_a_token_from_another_partition_or_no_token_at_all_is_a_bad_request(table):
    _fill(table, P, ["A", "B", "C"])
    _fill(table, OTHER, ["A", "B", "C"])
    _, token = table.query(P, limit=1)
    assert token
    with pytest.raises(BadRequest) as err:
        table.query(OTHER, limit=1, token=token)
    assert err.value.code == "invalid_token" and err.value.field == "nextToken"
    for bad in ("not-a-token", "e30", "bnVsbA", token[:-3] + "!!!"):
        with pytest.raises(BadRequest):
            table.query(P, limit=1, token=bad)
    with pytest.raises(BadRequest):  # a base-table token on an index: not this list's token
        table.query(P, index="GSI1", limit=1, token=token)


def _token(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def test_a_crafted_token_in_the_callers_own_partition_is_a_bad_request_not_a_crash(table):
    """A client can forge the token's JSON: only the shape this query issues is accepted."""
    _fill(table, P, ["RUN#01", "RUN#02", "MEM#01"])
    for forged in (
        {"PK": P},  # the partition alone
        {"PK": P, "SK": ""},  # an empty sort key
        {"PK": P, "SK": "RUN#01", "extra": "x"},  # more than the key
        {"PK": P, "SK": 5},  # not a string
        {"PK": P, "SK": "MEM#01"},  # outside the query's sort-key prefix
    ):
        with pytest.raises(BadRequest) as err:
            table.query(P, sk_prefix="RUN#", limit=1, token=_token(forged))
        assert err.value.code == "invalid_token", forged
    with pytest.raises(BadRequest):
        table.query(P, sk_after="RUN#02", limit=1, token=_token({"PK": P, "SK": "RUN#01"}))
    with pytest.raises(BadRequest):  # an index token needs the table's and the index's keys
        table.query("g", index="GSI1", limit=1, token=_token({"GSI1PK": "g", "GSI1SK": "1"}))
    items, _ = table.query(P, sk_prefix="RUN#", limit=1, token=_token({"PK": P, "SK": "RUN#01"}))
    assert _sks(items) == ["RUN#02"]  # a well-formed key of this list is a key like any other


def test_projection_returns_only_the_named_attributes(table):
    table.put({"PK": P, "SK": "A", "big": "x" * 100, "GSI1PK": "g", "GSI1SK": "1", "extra": 1})
    items, _ = table.query(P, projection="PK, SK")
    assert items == [{"PK": P, "SK": "A"}]
    items, _ = table.query("g", index="GSI1", projection="PK, SK")
    assert items == [{"PK": P, "SK": "A"}]
    items, _ = table.query(P, projection="extra, absent")
    assert items == [{"extra": 1}]


def test_index_queries_use_the_index_keys_and_skip_items_without_them(table):
    table.batch_write(
        puts=[
            {"PK": P, "SK": "RUN#3", "GSI1PK": "runs", "GSI1SK": "a", "GSI2PK": "reexam", "GSI2SK": "2"},
            {"PK": P, "SK": "RUN#1", "GSI1PK": "runs", "GSI1SK": "c"},
            {"PK": OTHER, "SK": "RUN#2", "GSI1PK": "runs", "GSI1SK": "b"},
            {"PK": P, "SK": "RUN#4", "GSI1PK": "runs"},  # no GSI1SK: not in GSI1
            {"PK": P, "SK": "RUN#5", "GSI1SK": "d"},  # no GSI1PK: not in GSI1
            {"PK": P, "SK": "RUN#6", "GSI2PK": "reexam", "GSI2SK": "1"},
            {"PK": P, "SK": "RUN#7", "GSI1PK": "other", "GSI1SK": "a"},
        ]
    )
    items, token = table.query("runs", index="GSI1")
    assert [(i["PK"], i["SK"]) for i in items] == [(P, "RUN#3"), (OTHER, "RUN#2"), (P, "RUN#1")] and token is None
    assert items[0] == {"PK": P, "SK": "RUN#3", "GSI1PK": "runs", "GSI1SK": "a", "GSI2PK": "reexam", "GSI2SK": "2"}  # ALL
    assert _sks(table.query("runs", index="GSI1", newest_first=True)[0]) == ["RUN#1", "RUN#2", "RUN#3"]
    assert _sks(table.query("runs", index="GSI1", sk_prefix="b")[0]) == ["RUN#2"]
    assert _sks(table.query("runs", index="GSI1", sk_after="a")[0]) == ["RUN#2", "RUN#1"]
    assert _sks(table.query("reexam", index="GSI2")[0]) == ["RUN#6", "RUN#3"]
    assert table.query("runs", index="GSI2") == ([], None)
    assert table.query(P, index="GSI1") == ([], None)  # the base table's key is not the index's

    # An item enters and leaves a sparse index with its index attributes.
    table.update(P, "RUN#4", "SET GSI1SK = :sk", values={":sk": "b0"})
    assert _sks(table.query("runs", index="GSI1")[0]) == ["RUN#3", "RUN#2", "RUN#4", "RUN#1"]
    table.update(P, "RUN#3", "REMOVE GSI1PK")
    table.update(P, "RUN#1", "SET GSI1SK = :sk", values={":sk": "0"})  # moves within the index
    assert _sks(table.query("runs", index="GSI1")[0]) == ["RUN#1", "RUN#2", "RUN#4"]
    table.delete(OTHER, "RUN#2")
    assert _sks(table.query("runs", index="GSI1")[0]) == ["RUN#1", "RUN#4"]
    table.put({"PK": P, "SK": "RUN#1"})  # a put without the index attributes drops it from the index
    assert _sks(table.query("runs", index="GSI1")[0]) == ["RUN#4"]


def test_index_queries_page_with_tokens(table):
    table.batch_write(puts=[{"PK": P, "SK": f"USAGE#{i}", "GSI1PK": "g", "GSI1SK": f"s#{9 - i}"} for i in range(5)])
    table.batch_write(puts=[{"PK": P, "SK": f"USAGE#x{i}", "GSI1PK": "g", "GSI1SK": f"t#{i}"} for i in range(2)])
    seen, token = [], None
    for _ in range(3):
        items, token = table.query("g", index="GSI1", sk_prefix="s#", limit=2, token=token, newest_first=True)
        seen += [i["GSI1SK"] for i in items]
        if token is None:
            break
    assert seen == ["s#9", "s#8", "s#7", "s#6", "s#5"] and token is None
    _, token = table.query("g", index="GSI1", limit=1)
    assert token
    with pytest.raises(BadRequest):
        table.query("h", index="GSI1", limit=1, token=token)
    with pytest.raises(BadRequest):
        table.query("g", index="GSI2", limit=1, token=token)


def test_an_index_has_no_strongly_consistent_reads(table):
    with pytest.raises(ClientError) as err:
        table.query("g", index="GSI1", consistent=True)
    assert _code(err) == "ValidationException"
    table.put({"PK": P, "SK": "A"})
    assert _sks(table.query(P, consistent=True)[0]) == ["A"]


def test_query_all_follows_every_page_and_max_items_stops_early(table):
    sks = [f"ARCH#{i:02d}" for i in range(7)]
    _fill(table, P, sks)
    _fill(table, P, ["OTHER"])
    paged, client = _small_pages(table, 2)
    assert _sks(paged.query_all(P, sk_prefix="ARCH#")) == sks
    assert client.queries == 4
    client.queries = 0
    assert _sks(paged.query_all(P, sk_prefix="ARCH#", max_items=5)) == sks[:5]
    assert client.queries == 3
    client.queries = 0
    assert _sks(paged.query_all(P, sk_prefix="ARCH#", max_items=3, newest_first=True)) == sks[::-1][:3]
    assert client.queries == 2
    assert _sks(paged.query_all(P, sk_after="ARCH#04")) == ["ARCH#05", "ARCH#06", "OTHER"]
    assert paged.query_all(P, sk_prefix="ARCH#", projection="PK, SK")[0] == {"PK": P, "SK": "ARCH#00"}
    assert _sks(table.query_all(P, max_items=2)) == ["ARCH#00", "ARCH#01"]  # one Query with Limit 2


def test_query_all_over_an_index(table):
    table.batch_write(puts=[{"PK": P, "SK": f"M{i}", "GSI2PK": "rank", "GSI2SK": f"{i:02d}"} for i in range(5)])
    paged, client = _small_pages(table, 2)
    assert _sks(paged.query_all("rank", index="GSI2")) == ["M0", "M1", "M2", "M3", "M4"]
    assert _sks(paged.query_all("rank", index="GSI2", newest_first=True, max_items=3)) == ["M4", "M3", "M2"]
    assert client.queries == 3 + 2


# --- several items --------------------------------------------------------------------------------
def test_get_many_returns_the_items_that_exist(table):
    _fill(table, P, ["MEM#a", "MEM#b", "MEM#c"])
    _fill(table, OTHER, ["MEM#a"])
    assert table.get_many([]) == []
    found = table.get_many([(P, "MEM#c"), (P, "MEM#missing"), (OTHER, "MEM#a"), (P, "MEM#a"), ("nobody", "MEM#a")])
    assert sorted((i["PK"], i["SK"], i["n"]) for i in found) == [(P, "MEM#a", 0), (P, "MEM#c", 2), (OTHER, "MEM#a", 0)]
    assert table.get_many([(P, "MEM#missing")]) == []


def test_get_many_refuses_duplicate_keys(table):
    _fill(table, P, ["MEM#a"])
    with pytest.raises(ClientError) as err:
        table.get_many([(P, "MEM#a"), (P, "MEM#a")])
    assert _code(err) == "ValidationException"


def test_a_transaction_applies_every_operation(table):
    table.put({"PK": P, "SK": "SESSION#s1", "leaseOwner": "run_1", "revision": 1})
    table.put({"PK": "tenant-1", "SK": "AGENT#a1"})
    table.transact(
        [
            table.update_op(
                P,
                "SESSION#s1",
                "SET revision = :r REMOVE leaseOwner",
                condition="leaseOwner = :run",
                values={":run": "run_1", ":r": 2},
            ),
            table.put_op(
                {"PK": "tenant-1", "SK": "RUN#run_1", "status": "succeeded", "usage": {"costUsd": 0.25}},
                condition="attribute_not_exists(PK) OR #s IN (:queued, :running)",
                names={"#s": "status"},
                values={":queued": "queued", ":running": "running"},
            ),
            table.put_op({"PK": "tenant-1#USAGE", "SK": "2026#u1", "model": "m"}),
            table.check_op("tenant-1", "AGENT#a1"),
            table.update_op(P, "EXTRACT#new", "SET a = :v ADD attempts :one", values={":v": "x", ":one": 1}),
        ]
    )
    assert table.get(P, "SESSION#s1") == {"PK": P, "SK": "SESSION#s1", "revision": 2}
    assert table.get("tenant-1", "RUN#run_1") == {
        "PK": "tenant-1",
        "SK": "RUN#run_1",
        "status": "succeeded",
        "usage": {"costUsd": 0.25},
    }
    assert table.get("tenant-1#USAGE", "2026#u1") == {"PK": "tenant-1#USAGE", "SK": "2026#u1", "model": "m"}
    assert table.get(P, "EXTRACT#new") == {"PK": P, "SK": "EXTRACT#new", "a": "x", "attempts": 1}


def test_a_failed_condition_cancels_the_whole_transaction(table):
    table.put({"PK": "tenant-1", "SK": "WS#w1"})
    table.put({"PK": P, "SK": "SESSION#s1", "leaseOwner": "run_2"})
    with pytest.raises(ConditionFailed) as err:
        table.transact(
            [
                table.put_op({"PK": "tenant-1", "SK": "AGENT#a1"}, condition="attribute_not_exists(PK)"),
                table.check_op("tenant-1", "WS#missing"),
            ]
        )
    assert err.value.codes == ["None", "ConditionalCheckFailed"]
    assert err.value.failed_at(1) and not err.value.failed_at(0) and not err.value.failed_at(2)
    assert err.value.item is None and isinstance(err.value, Cancelled)
    assert table.get("tenant-1", "AGENT#a1") is None

    with pytest.raises(ConditionFailed) as err:
        table.transact(
            [
                table.update_op(P, "SESSION#s1", "REMOVE leaseOwner", condition="leaseOwner = :run", values={":run": "run_1"}),
                table.put_op({"PK": "tenant-1", "SK": "RUN#run_1"}),
                table.check_op("tenant-1", "WS#w1"),
            ]
        )
    assert err.value.codes == ["ConditionalCheckFailed", "None", "None"] and err.value.failed_at(0)
    assert table.get("tenant-1", "RUN#run_1") is None
    assert table.get(P, "SESSION#s1") == {"PK": P, "SK": "SESSION#s1", "leaseOwner": "run_2"}

    with pytest.raises(ConditionFailed) as err:
        table.transact(
            [
                table.put_op({"PK": "tenant-1", "SK": "RUN#run_1"}),
                table.update_op(P, "EXTRACT#r", "ADD attempts :one", values={":one": 1}),
                table.put_op({"PK": "tenant-1", "SK": "WS#w1", "name": "x"}, condition="attribute_not_exists(PK)"),
            ]
        )
    assert err.value.codes == ["None", "None", "ConditionalCheckFailed"]
    assert table.get("tenant-1", "RUN#run_1") is None and table.get(P, "EXTRACT#r") is None
    assert table.get("tenant-1", "WS#w1") == {"PK": "tenant-1", "SK": "WS#w1"}


def test_two_operations_on_one_item_in_a_transaction_are_a_validation_error(table):
    with pytest.raises(ClientError) as err:
        table.transact(
            [
                table.put_op({"PK": P, "SK": "SESSION#s1", "a": 1}),
                table.update_op(P, "SESSION#s1", "SET b = :v", values={":v": 2}),
            ]
        )
    assert _code(err) == "ValidationException"
    with pytest.raises(ClientError) as err:
        table.transact([table.put_op({"PK": P, "SK": "X"}), table.check_op(P, "X")])
    assert _code(err) == "ValidationException"
    assert table.get(P, "SESSION#s1") is None and table.get(P, "X") is None


def test_a_transaction_takes_at_most_100_operations(table):
    table.transact([table.put_op({"PK": P, "SK": f"T#{i:03d}"}) for i in range(100)])
    assert len(table.query_all(P, sk_prefix="T#")) == 100
    with pytest.raises(ClientError) as err:
        table.transact([table.put_op({"PK": P, "SK": f"U#{i:03d}"}) for i in range(101)])
    assert _code(err) == "ValidationException"
    assert table.query_all(P, sk_prefix="U#") == []


def test_batch_write_puts_and_deletes_more_than_25_items(table):
    table.batch_write(puts=[{"PK": P, "SK": f"ARCH#{i:03d}", "text": f"t{i}", "f": i / 4} for i in range(60)])
    items = table.query_all(P)
    assert _sks(items) == [f"ARCH#{i:03d}" for i in range(60)]
    assert items[5] == {"PK": P, "SK": "ARCH#005", "text": "t5", "f": 1.25}
    table.batch_write(
        puts=[{"PK": P, "SK": f"ARCH#{i:03d}", "text": "again"} for i in range(60, 90)],
        deletes=[(P, f"ARCH#{i:03d}") for i in range(0, 60, 2)] + [(P, "ARCH#999"), (OTHER, "ARCH#001")],
    )
    left = table.query_all(P)
    assert _sks(left) == [f"ARCH#{i:03d}" for i in range(1, 60, 2)] + [f"ARCH#{i:03d}" for i in range(60, 90)]
    assert left[-1]["text"] == "again"
    table.batch_write()  # nothing to write


def test_delete_all_empties_a_partition_or_a_prefix_of_it(table):
    _fill(table, P, [f"CARDTYPE#{i:02d}" for i in range(30)] + ["CARDTYPES", "AGENT#a1", "WS#w1"])
    _fill(table, OTHER, ["CARDTYPE#01"])
    paged, client = _small_pages(table, 7)
    assert paged.delete_all(P, sk_prefix="CARDTYPE#") == 30
    assert client.queries == 5
    assert _sks(table.query_all(P)) == ["AGENT#a1", "CARDTYPES", "WS#w1"]
    assert paged.delete_all(P, sk_prefix="CARDTYPE#") == 0
    assert table.delete_all(P) == 3
    assert table.query_all(P) == [] and _sks(table.query_all(OTHER)) == ["CARDTYPE#01"]
    assert table.delete_all("nobody") == 0
