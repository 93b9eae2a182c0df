"""moto, made fit to stand in for AWS in a long-running local stack: `patch_moto()`.

Eight changes to moto's in-process backends, for the local stack and the tests (nothing here is
used in AWS; none changes what a request answers, tests/unit/test_local_emulator.py compares,
but (7) for a receipt handle deleted long before):

1. DynamoDB requests are serialised. moto's DynamoDB backend keeps items in plain dicts and takes
   no lock: a Query iterating a partition while another thread writes to it fails with
   "dictionary changed size during iteration" (a 500 the SDK retries after a backoff). Council
   runs write from several threads at once, so DynamoDB requests to the emulator take one
   process-wide lock. Other services are left alone (SQS long polls must not hold a lock).

2. TransactWriteItems keeps before-images of the items it touches, not of the tables. moto
   backs up by deep-copying the WHOLE table, once per operation of the transaction, before
   applying anything: every chat turn's commit copied every item ever stored, several times,
   under the lock of (1). `_transact_write_items` is moto's algorithm step for step (the same
   validation, the same per-operation condition checks, the same cancellation reasons in the
   same order) with a journal of the touched items instead: on cancellation those items, their
   partitions and the table's stream records are put back as they were. Cost: one item copy per
   operation, whatever the table holds.

3. moto's instance registry is switched off. Every moto model instance (`BaseModel.__new__`:
   each DynamoDB item written, copied for a Query or a backup, each S3 object body, each SQS
   message, each Table) is appended to a class-level `instances_tracked` list, for moto's web
   dashboard (`/moto-api/data.json`), and only a full reset empties it. Nothing else reads it
   except S3's reset, which closes the bodies of the objects in it (the ones still in buckets
   are closed by that reset anyway; dropped ones close when collected). With it, memory grew
   with every request for as long as the stack ran, and with (2) it kept every table copy of
   every transaction alive: the local stack's dashboard lists no instances instead.

4. A Query reads the items it can return. moto's Query starts from `Table.all_items()`: every
   item of the table, sorted by the table's keys, before keeping one partition (a table query)
   or the items of one index key (an index query, sorted again by the index's keys, a total
   order). Here a table query starts from its partition and an index query from the items whose
   index hash key has the value asked for; the rest of moto's Query is unchanged. moto keeps no
   index, so the emulator keeps one per table (`_IndexMap`: index hash key value -> items), built
   on the table's first index query and brought up to date after every write request from the
   keys the request names (the item is read back as stored, so an update that changes an index
   key in place, a cancelled transaction and a conditional write that failed are all seen as
   they are). With 10,000 rows a scope, an index query reads its ~260 rows, not the table; and
   the order of a bucket of items is kept until one of them is written, so a query that keeps
   the whole bucket (one hash condition) does not sort 10,000 items each time.
   A range condition on the sort key (=, <, <=, >, >=, BETWEEN, begins_with on strings) keeps
   only the slice of the partition (or of the index bucket) it can match, found by bisection over
   the order kept while the partition is unchanged, widened by one item at each end (moto looks
   at the item after its last result to decide on LastEvaluatedKey): an agent's memories share
   its partition with its whole archive, and a memory read walked that archive at every turn.

5. A string's cast value is the string. moto compares, hashes and sorts attribute values through
   `DynamoType.cast_value`, which tests for a number, a set, a list, a map and null before it
   returns a string as it is: every key comparison paid five tests. Here a string returns at once
   (the same value); other types take moto's path.

6. Answers that carry items are written as JSON directly. moto 5.2 writes every answer through
   its generic botocore-model serializer, which walks the output shape member by member: a
   Query of 200 items took ~0.5 s to serialize, most of a local chat turn. For Query, Scan,
   GetItem and BatchGetItem, and UpdateItem and PutItem (their `Attributes`: a chat
   turn's session lease answers with the session row, its memory snapshot included), the answer
   is moto's own result dict (attribute values already in DynamoDB JSON), so it is dumped as it
   is, binary values base64-encoded as the serializer does; the same status, headers and body
   (tests/unit/test_local_emulator.py compares them).

7. SQS forgets the receipt handles of deleted messages after a while. moto adds every receipt
   handle of each message it deletes to its queue's `deleted_messages` set, so that deleting one
   again succeeds, and never empties it: every message ever consumed left ~230 bytes behind (the
   soak's own figure, `bench/soak.py`: `sqs_deleted_handles`). Here each queue keeps the handles of
   its newest `DELETED_HANDLES_KEPT` deletions (a repeated delete of an older one is refused as an
   invalid handle, as SQS refuses an expired one).

8. A projection of top-level attributes converts those attributes only. moto's `Item.project`
   turns the WHOLE item into plain Python values (boto3's deserializer, attribute by attribute)
   once per name in the ProjectionExpression, then serializes what it kept: a Query of 90 rows
   projecting 9 of their 16 attributes deserialized ~13,000 values, so projecting cost more than
   it saved (DynamoDB projects for free). Names without a path (no `.`, no `[i]`) take the same
   round trip (deserialize, merge, serialize) on the attributes they name, and nothing else
   (strings, booleans and nulls, which it leaves as they are, not even that); nested paths take
   moto's path.

The profile that found (2), (3) and (4), and the figures before and after, are in docs/ARCHITECTURE.md
("Local stack"); `bench/soak.py` (make bench) watches that memory and turn time stay flat.
"""

from __future__ import annotations

import base64
import bisect
import copy
import functools
import json
import threading
from typing import Any

_LOCK = threading.RLock()
_MAX_TRANSACTION_ITEMS = 100


def patch_moto() -> None:
    """Idempotent: the changes above, for every moto backend in this process."""
    _serialize_dynamodb()
    _bounded_transactions()
    _untrack_instances()
    _partition_queries()
    _quick_string_casts()
    _plain_json_item_answers()
    _bounded_deleted_handles()
    _top_level_projections()


# --------------------------------------------------------------------------- 1. one lock
def _serialize_dynamodb() -> None:
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "_engram_serialized", False):
        return
    original = DynamoHandler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _LOCK:
            try:
                return original(self)
            finally:
                _refresh_index_maps(self)

    call_action._engram_serialized = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


# --------------------------------------------------------------------------- 2. transactions
class _Journal:
    """Before-images of what one transaction writes: the items (by table and key), whether their
    partition existed, and how many stream records each table had."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.items: list[tuple[Any, Any, Any, bool, Any]] = []
        self.streams: dict[int, tuple[Any, list[Any], int]] = {}

    def remember(self, table_name: str, key: dict[str, Any]) -> None:
        """Before the operation on `key` reads or writes anything. A table or key moto cannot resolve
        is skipped: the operation then fails on the same lookup before it writes."""
        try:
            table = self.backend.get_table(table_name)
            hash_key, range_key = self.backend.get_keys_value(table, key)
        except Exception:
            return
        partition = table.items.get(hash_key)  # .get: table.items is a defaultdict
        if table.range_key_attr is not None:
            before = partition.get(range_key) if partition is not None else None
        else:
            before = partition
        # A copy: UpdateItem changes the stored item in place.
        self.items.append((table, hash_key, range_key, partition is not None, copy.deepcopy(before)))
        shard = table.stream_shard
        if shard is not None and id(table) not in self.streams:
            self.streams[id(table)] = (shard, shard.items, len(shard.items))

    def rollback(self) -> None:
        for table, hash_key, range_key, had_partition, before in reversed(self.items):
            if table.range_key_attr is not None:
                if before is None:
                    partition = table.items.get(hash_key)
                    if partition is not None:
                        partition.pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = before
                if not had_partition and hash_key in table.items and not table.items[hash_key]:
                    del table.items[hash_key]
            elif before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before
        for shard, records, count in self.streams.values():
            del records[count:]
            shard.items = records
        self.items.clear()
        self.streams.clear()


Reason = tuple[str, str, "dict[str, Any] | None"] | tuple[None, None, None]  # (Code, Message, Item)


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto's DynamoDBBackend.transact_write_items (5.x), with `_Journal` in place of the deep copy
    of every table (see the module docstring). Any exception that escapes undoes what was applied."""
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > _MAX_TRANSACTION_ITEMS:
        raise TooManyTransactionsException()
    journal = _Journal(self)
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[Reason] = []
    try:
        for item in transact_items:
            # Check transact writes are not performing multiple operations on the same item
            if len(list(item.keys())) > 1:
                raise TransactWriteSingleOpException
            errors.append(_one_operation(self, item, journal, check_unicity))
    except BaseException:
        journal.rollback()
        raise
    if any(code is not None for code, _, _ in errors):
        journal.rollback()
        raise TransactionCanceledException(errors)


def _one_operation(self: Any, item: dict[str, Any], journal: _Journal, check_unicity: Any) -> Reason:
    """One operation of the transaction, applied; its cancellation reason (all None when it applied).
    A validation error is raised: it fails the request rather than cancelling the transaction."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import ConditionalCheckFailed, MockValidationException

    original_item: dict[str, Any] | None = None
    try:
        op_type, op = next(iter(item.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        condition_expression = op.get("ConditionExpression")
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        if op_type == "Put":
            attrs = op["Item"]
            table = self.get_table(table_name)
            key = {table.hash_key_attr: attrs[table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = attrs[table.range_key_attr]
        else:
            key = op["Key"]
        check_unicity(table_name, key)
        journal.remember(table_name, key)

        current = self.get_item(table_name, key)
        if condition_expression is not None:
            condition_op = get_filter_expression(condition_expression, names, values)
            if not condition_op.expr(current):
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    original_item = current.to_json()["Attributes"]
                raise ConditionalCheckFailed(item=original_item)

        conditions = {
            "condition_expression": condition_expression,
            "expression_attribute_names": names,
            "expression_attribute_values": values,
        }
        if op_type == "Put":
            self.put_item(table_name, op["Item"], **conditions)
        elif op_type == "Delete":
            self.delete_item(table_name, key, **conditions)
        elif op_type == "Update":
            self.update_item(table_name, key, update_expression=op["UpdateExpression"], **conditions)
        return (None, None, None)
    except MockValidationException:  # MultipleTransactionsException included
        raise
    except ConditionalCheckFailed as e:
        return ("ConditionalCheckFailed", str(e.message), original_item)
    except Exception as e:
        return (type(e).__name__, str(e), original_item)


_transact_write_items._engram_bounded = True  # type: ignore[attr-defined]


def _bounded_transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend.transact_write_items, "_engram_bounded", False):
        return
    _transact_write_items.__wrapped__ = DynamoDBBackend.transact_write_items  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]


# --------------------------------------------------------------------------- 3. no registry
def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    from moto.core.common_models import BaseModel

    return super(BaseModel, cls).__new__(cls)  # moto's BaseModel.__new__, minus the registry


_UNTRACKED_NEW = staticmethod(_untracked_new)


def _untrack_instances() -> None:
    from moto.core.common_models import BaseModel

    if BaseModel.__dict__["__new__"] is not _UNTRACKED_NEW:
        BaseModel.__new__ = _UNTRACKED_NEW  # type: ignore[assignment,method-assign]
    # Let go of what was registered before (moto's reset empties the same lists).
    pending = list(BaseModel.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if model.__dict__.get("instances_tracked"):
            model.instances_tracked = []  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- 5. string casts
def _quick_string_casts() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    moto_cast = DynamoType.cast_value.fget  # type: ignore[attr-defined]
    if getattr(moto_cast, "_engram_quick", False):
        return

    def cast_value(self: Any) -> Any:
        return self.value if self.type == "S" else moto_cast(self)

    cast_value._engram_quick = True  # type: ignore[attr-defined]
    cast_value.__wrapped__ = moto_cast  # type: ignore[attr-defined]
    DynamoType.cast_value = property(cast_value)  # type: ignore[assignment,method-assign]


# --------------------------------------------------------------------------- 4. queries
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


class _IndexMap:
    """The items of one table filed by the value of each global index's hash key attribute."""

    def __init__(self, table: Any) -> None:
        self.signature = _index_signature(table)
        self.attributes = {k["AttributeName"] for index in table.global_indexes for k in index.schema if k["KeyType"] == "HASH"}
        self.by_value: dict[str, dict[Any, dict[Any, Any]]] = {name: {} for name in self.attributes}
        self.filed: dict[Any, list[tuple[str, Any]]] = {}  # item key -> where it is filed
        self.sort_keys: dict[Any, dict[tuple[str, ...], tuple[Any, ...]]] = {}  # item key -> attrs -> key
        # (attribute, value) -> sort attrs -> the bucket's items in that order, until the bucket changes
        self.sorted: dict[tuple[str, Any], dict[tuple[str, ...], list[Any]]] = {}
        # table hash key -> the partition's items in range key order and their range keys, until one
        # of them is written
        self.partitions: dict[Any, tuple[list[Any], list[Any]]] = {}
        partitions = table.items.values()
        for stored in partitions if table.range_key_attr is None else (i for p in partitions for i in p.values()):
            self.file(_item_key(table, stored), stored)

    @classmethod
    def of(cls, table: Any) -> _IndexMap:
        found: _IndexMap | None = table.__dict__.get("_engram_index_map")
        if found is None or found.signature != _index_signature(table):  # a new table, or UpdateTable
            found = table._engram_index_map = cls(table)
        return found

    def file(self, item_key: Any, stored: Any) -> None:
        self.partitions.pop(item_key[0], None)
        places = []
        for name in self.attributes:
            value = stored.attrs.get(name)
            if value is not None:
                self.by_value[name].setdefault(value, {})[item_key] = stored
                self.sorted.pop((name, value), None)
                places.append((name, value))
        self.filed[item_key] = places

    def sort_key(self, stored: Any, attrs: tuple[str, ...]) -> tuple[Any, ...]:
        keys = self.sort_keys.setdefault((stored.hash_key, stored.range_key), {})
        found = keys.get(attrs)
        if found is None:
            found = keys[attrs] = tuple(stored.attrs[name].cast_value for name in attrs)
        return found

    def unfile(self, item_key: Any) -> None:
        self.partitions.pop(item_key[0], None)
        self.sort_keys.pop(item_key, None)
        for name, value in self.filed.pop(item_key, []):
            self.sorted.pop((name, value), None)
            bucket = self.by_value[name].get(value)
            if bucket is not None:
                bucket.pop(item_key, None)
                if not bucket:
                    del self.by_value[name][value]

    def items_with(self, conditions: list[tuple[str, Any]]) -> list[Any] | None:
        """The items filed under the first condition's value; None when it is not a filed attribute."""
        name, value = conditions[0]
        if name not in self.attributes:
            return None
        return list(self.by_value[name].get(value, {}).values())

    def sorted_bucket(self, bucket: tuple[str, Any], attrs: tuple[str, ...], items: list[Any]) -> list[Any]:
        """`items` (the whole bucket) in the order of `attrs`, sorted once while the bucket is
        unchanged: a query of 10 rows from a bucket of 10,000 does not sort 10,000 rows each time."""
        orders = self.sorted.setdefault(bucket, {})
        found = orders.get(attrs)
        if found is None or len(found) != len(items):
            found = orders[attrs] = sorted(items, key=lambda item: self.sort_key(item, attrs))
            orders.pop(("keys", *attrs), None)
        return list(found)  # moto may reverse it in place

    def bucket_keys(self, bucket: tuple[str, Any], attrs: tuple[str, ...], position: int) -> list[Any] | None:
        """The values at `position` of the sort keys of a bucket kept in the order of `attrs`."""
        orders = self.sorted.get(bucket) or {}
        found = orders.get(attrs)
        if found is None:
            return None
        keys = orders.get(("keys", *attrs))
        if keys is None:
            keys = orders[("keys", *attrs)] = [self.sort_key(item, attrs)[position] for item in found]
        return keys

    def sorted_partition(self, table: Any, hash_key: Any, partition: dict[Any, Any]) -> tuple[list[Any], list[Any]]:
        """A table partition's items in range key order and their range keys' cast values, sorted
        once while the partition is unchanged (an item written drops it: `file`, `unfile`)."""
        found = self.partitions.get(hash_key)
        if found is None or len(found[0]) != len(partition):
            attr = (table.range_key_attr,)
            items = sorted(partition.values(), key=lambda item: self.sort_key(item, attr))
            found = self.partitions[hash_key] = (items, [self.sort_key(item, attr)[0] for item in items])
        return found


_BISECTS = {"EQ": "EQ", "=": "EQ", "LT": "LT", "<": "LT", "LE": "LE", "<=": "LE", "GT": "GT", ">": "GT"}
_BISECTS.update({"GE": "GE", ">=": "GE", "BETWEEN": "BETWEEN", "BEGINS_WITH": "BEGINS_WITH"})


def _key_range(keys: list[Any], comparison: str | None, values: list[Any]) -> tuple[int, int]:
    """The slice of `keys` (sorted strings) a range key condition can match, widened by one key on
    each side: moto's Query loop looks at the item after its last result to decide whether the page
    has more (LastEvaluatedKey), in either direction. The whole list for anything else."""
    whole = 0, len(keys)
    op = _BISECTS.get(comparison or "")
    if op is None or not values or any(getattr(v, "type", None) != "S" for v in values):
        return whole
    if any(type(k) is not str for k in keys):
        return whole
    first = values[0].value
    if op == "EQ":
        lo, hi = bisect.bisect_left(keys, first), bisect.bisect_right(keys, first)
    elif op == "LT":
        lo, hi = 0, bisect.bisect_left(keys, first)
    elif op == "LE":
        lo, hi = 0, bisect.bisect_right(keys, first)
    elif op == "GT":
        lo, hi = bisect.bisect_right(keys, first), len(keys)
    elif op == "GE":
        lo, hi = bisect.bisect_left(keys, first), len(keys)
    elif op == "BETWEEN" and len(values) == 2:
        lo, hi = bisect.bisect_left(keys, first), bisect.bisect_right(keys, values[1].value)
    elif op == "BEGINS_WITH":
        lo = hi = bisect.bisect_left(keys, first)
        while hi < len(keys) and keys[hi].startswith(first):
            hi += 1
    else:
        return whole
    return max(0, lo - 1), min(len(keys), max(lo, hi) + 1)


def _index_signature(table: Any) -> tuple[Any, ...]:
    return tuple((index.name, repr(index.schema)) for index in table.global_indexes)


def _item_key(table: Any, stored: Any) -> tuple[Any, Any]:
    return stored.hash_key, stored.range_key if table.range_key_attr is not None else None


def _written_keys(action: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table name, key or whole item) of every item a write request names."""
    if action in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(body.get("TableName", ""), body.get("Item") or body.get("Key") or {})]
    if action == "TransactWriteItems":
        named = []
        for entry in body.get("TransactItems") or []:
            for op in entry.values():
                named.append((op.get("TableName", ""), op.get("Item") or op.get("Key") or {}))
        return named
    named = []
    for table_name, requests in (body.get("RequestItems") or {}).items():  # BatchWriteItem
        for request in requests:
            for op in request.values():
                named.append((table_name, op.get("Item") or op.get("Key") or {}))
    return named


def _refresh_index_maps(handler: Any) -> None:
    """After a write request (applied or not): each item it names, filed again as it is stored now."""
    try:
        action = handler._get_action()
        if action not in _WRITES or not isinstance(handler.body, dict):
            return
        backend = handler.dynamodb_backend
        for table_name, key in _written_keys(action, handler.body):
            try:
                table = backend.get_table(table_name)
            except Exception:
                continue
            index_map: _IndexMap | None = table.__dict__.get("_engram_index_map")
            if index_map is None:
                continue  # built whole on the table's first index query
            try:
                hash_key, range_key = backend.get_keys_value(table, key)
            except Exception:
                continue
            index_map.unfile((hash_key, range_key))
            partition = table.items.get(hash_key)
            stored = partition.get(range_key) if partition is not None and range_key is not None else partition
            if stored is not None:
                # Filed under the stored item's own key values (equal to the request's): the map
                # keeps no second copy of every key it files.
                index_map.file(_item_key(table, stored), stored)
    except Exception:  # never fail a request over the map; drop it, the next index query rebuilds it
        for table in list(getattr(getattr(handler, "dynamodb_backend", None), "tables", {}).values()):
            table.__dict__.pop("_engram_index_map", None)


def _partition_slice(table: Any, index_map: _IndexMap, hash_key: Any, comparison: str | None, values: list[Any]) -> list[Any]:
    """A table query's candidates: its partition in the range key's order (sorted once while the
    partition is unchanged), so moto's sort by range key right after makes one pass instead of
    sorting; and with a range condition only the slice it can match (an agent's memories are read
    from a partition that also holds its whole archive)."""
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if table.range_key_attr is None:
        return [partition]
    for _ in range(2):
        items, keys = index_map.sorted_partition(table, hash_key, partition)
        lo, hi = _key_range(keys, comparison, values)
        found = items[lo:hi]
        if all(partition.get(item.range_key) is item for item in found):
            break
        index_map.partitions.pop(hash_key, None)  # written past the map: sorted again
    return found


def _partition_queries() -> None:
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "_engram_partition", False):
        return
    original = Table.query

    @functools.wraps(original)
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        comparison = args[0] if args else kwargs.get("range_comparison")
        range_objs = (args[1] if len(args) > 1 else kwargs.get("range_objs")) or []
        if index_name:
            # The candidates are sorted by the index's keys then the table's (a total order) right
            # after, and moto keeps those whose index hash keys match: the items the index map
            # files under one of those values are a superset of the answer (a local secondary
            # index shares the table's hash key: its candidates are the partition's).
            conditions = kwargs.get("hash_key_conditions") or []
            index_map = _IndexMap.of(self)

            whole_bucket: dict[str, Any] = {}

            def candidates() -> list[Any]:
                found = index_map.items_with(conditions) if conditions else None
                if found is not None:
                    whole_bucket.update(key=conditions[0], size=len(found))
                    return found
                if self.range_key_attr is None:
                    return list(self.items.values())
                return [item for partition in self.items.values() for item in partition.values()]

            def sorted_items(hash_attrs: list[str], range_attrs: list[str | None], found: list[Any]) -> list[Any]:
                # moto's order (the same attributes, compared by cast value), with each item's key
                # computed once while it is unchanged rather than at every comparison; when moto
                # kept the whole bucket (one hash condition), its order is kept too.
                attrs = tuple(self._generate_attr_to_sort_by(hash_attrs, range_attrs))
                keys = None
                if len(conditions) == 1 and whole_bucket and whole_bucket["size"] == len(found):
                    found = index_map.sorted_bucket(whole_bucket["key"], attrs, found)
                    keys = index_map.bucket_keys(whole_bucket["key"], attrs, 1)
                else:
                    found.sort(key=lambda item: index_map.sort_key(item, attrs))
                # Within one index hash key the order is the index range key's: a range condition
                # on it keeps a slice, found by bisection, not the whole bucket.
                ranges = kwargs.get("range_key_conditions") or []
                if comparison and len(conditions) == 1 and len(ranges) == 1 and attrs[1:2] == (ranges[0][0],):
                    if keys is None or len(keys) != len(found):
                        keys = [index_map.sort_key(item, attrs)[1] for item in found]
                    lo, hi = _key_range(keys, comparison, range_objs)
                    found = found[lo:hi]
                return found

            shadows = {"all_items": candidates, "sorted_items": sorted_items}
        else:
            # The items of other partitions are filtered out right after, and the rest sorted by
            # the range key: the same list, from the one partition.
            index_map = _IndexMap.of(self)

            def candidates() -> list[Any]:
                return _partition_slice(self, index_map, hash_key, comparison, range_objs)

            shadows = {"all_items": candidates}

        with _LOCK:
            self.__dict__.update(shadows)  # shadows the Table methods for this call only
            try:
                return original(self, hash_key, *args, **kwargs)
            finally:
                for name in shadows:
                    del self.__dict__[name]

    query._engram_partition = True  # type: ignore[attr-defined]
    Table.query = query  # type: ignore[method-assign]


# --------------------------------------------------------------------------- 6. item answers
_ITEM_ANSWERS = frozenset({"Query", "Scan", "GetItem", "BatchGetItem", "UpdateItem", "PutItem"})
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")  # B and BS values, as the serializer writes them
    raise TypeError(f"not JSON: {type(value).__name__}")


def _plain_json_item_answers() -> None:
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.serialized, "_engram_plain", False):
        return
    original = DynamoHandler.serialized

    @functools.wraps(original)
    def serialized(self: Any, action_result: Any) -> Any:
        result = action_result.result
        if isinstance(result, dict) and self._get_action() in _ITEM_ANSWERS:
            try:
                body = json.dumps(result, default=_json_value)
            except (TypeError, ValueError):
                return original(self, action_result)  # anything unexpected: moto's own path
            headers = {"Content-Type": JSON_CONTENT_TYPE}
            headers.update(self.response_headers)
            return 200, headers, body
        return original(self, action_result)

    serialized._engram_plain = True  # type: ignore[attr-defined]
    DynamoHandler.serialized = serialized  # type: ignore[method-assign]


# --------------------------------------------------------------------------- 7. deleted handles
DELETED_HANDLES_KEPT = 10_000


class _RecentHandles:
    """What moto uses of the set of deleted receipt handles (`in`, `update`), keeping the newest."""

    def __init__(self, handles: Any = ()) -> None:
        self._handles: dict[str, None] = {}
        self.update(handles)

    def update(self, handles: Any) -> None:
        for handle in handles:
            self._handles.pop(handle, None)
            self._handles[handle] = None
        while len(self._handles) > DELETED_HANDLES_KEPT:
            del self._handles[next(iter(self._handles))]

    def add(self, handle: str) -> None:
        self.update([handle])

    def __contains__(self, handle: object) -> bool:
        return handle in self._handles

    def __iter__(self) -> Any:
        return iter(list(self._handles))

    def __len__(self) -> int:
        return len(self._handles)


def _bounded_deleted_handles() -> None:
    from moto.sqs.models import Queue

    if getattr(Queue.__init__, "_engram_bounded", False):
        return
    original = Queue.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.deleted_messages = _RecentHandles(self.deleted_messages)

    init._engram_bounded = True  # type: ignore[attr-defined]
    Queue.__init__ = init  # type: ignore[method-assign]


# --------------------------------------------------------------------------- 8. projections
_AS_THEY_ARE = frozenset({"S", "BOOL", "NULL"})  # attribute types moto's projection round trip leaves alone


def _top_level_projections() -> None:
    from moto.dynamodb.models import dynamo_type
    from moto.dynamodb.models.dynamo_type import Item

    if getattr(Item.project, "_engram_top_level", False):
        return
    original = Item.project

    @functools.wraps(original)
    def project(self: Any, projection_expressions: list[list[str]]) -> Any:
        if any(len(path) != 1 or "[" in path[0] for path in projection_expressions):
            return original(self, projection_expressions)
        # moto's steps (find_nested_key on the item's plain values, merged, then serialized) on
        # the named attributes alone: the same values, in the same order. A string, a boolean and
        # a null come back from that round trip as they went in, so they skip it.
        kept: dict[str, Any] = {}
        for (name,) in projection_expressions:
            value = self.attrs.get(name)
            if value is None:
                continue
            if value.type in _AS_THEY_ARE:
                kept[name] = {value.type: value.value}
            else:
                plain = dynamo_type.deserializer.deserialize(value.to_regular_json())
                kept[name] = dynamo_type.serializer.serialize(plain)
        return Item(hash_key=self.hash_key, range_key=self.range_key, attrs=kept)

    project._engram_top_level = True  # type: ignore[attr-defined]
    Item.project = project  # type: ignore[method-assign]
