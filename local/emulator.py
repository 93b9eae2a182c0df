"""moto, made fit to stand in for AWS in a long-running local stack: `patch_moto()`.

Four changes to moto's in-process backends, for the local stack and the tests (nothing here is
used in AWS; none changes what a request answers, tests/unit/test_local_emulator.py compares):

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
   order). Here a table query starts from its partition and an index query from the unsorted
   items; the rest of moto's Query is unchanged. An index query still reads every item (moto
   keeps no index), without the sort that cost the most.

The profile that found (2), (3) and (4), and the figures before and after, are in docs/ARCHITECTURE.md
("Local stack"); `bench/soak.py` (make bench) watches that memory and turn time stay flat.
"""

from __future__ import annotations

import copy
import functools
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


def serialize_dynamodb() -> None:
    """The name tests/conftest.py calls: applies all of `patch_moto()`."""
    patch_moto()


# --------------------------------------------------------------------------- 1. one lock
def _serialize_dynamodb() -> None:
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "_engram_serialized", False):
        return
    original = DynamoHandler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

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


# --------------------------------------------------------------------------- 4. queries
def _partition_queries() -> None:
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "_engram_partition", False):
        return
    original = Table.query

    @functools.wraps(original)
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name:
            # The candidates are sorted by the index's keys then the table's (a total order) right
            # after: the sort of the whole table by the table's keys changes nothing.
            def candidates() -> list[Any]:
                if self.range_key_attr is None:
                    return list(self.items.values())
                return [item for partition in self.items.values() for item in partition.values()]
        else:
            # The items of other partitions are filtered out right after, and the rest sorted by
            # the range key: the same list, from the one partition.
            def candidates() -> list[Any]:
                partition = self.items.get(hash_key)
                if partition is None:
                    return []
                return [partition] if self.range_key_attr is None else list(partition.values())

        with _LOCK:
            self.all_items = candidates  # shadows Table.all_items for this call only
            try:
                return original(self, hash_key, *args, **kwargs)
            finally:
                del self.all_items

    query._engram_partition = True  # type: ignore[attr-defined]
    Table.query = query  # type: ignore[method-assign]
