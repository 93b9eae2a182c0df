"""The one DynamoDB helper every repository uses: calls with typed items (`aws.items`: the
(de)serialisation, paging tokens), one batch-write path with backoff, and conditional-check
failures turned into `ConditionFailed`.

Repositories own their key shapes (built in `aws.keys`) and turn `ConditionFailed` into the
domain error that fits; nothing outside `engram.aws` touches a boto3 DynamoDB client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engram.aws import clients as aws_clients
from engram.aws.clients import make_client
from engram.aws.items import decode_token, deserialize, encode_token, serialize, set_expression
from engram.kernel.errors import BadRequest

if TYPE_CHECKING:
    from botocore.exceptions import ClientError


def condition_failed(err: ClientError) -> bool:
    return bool(err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def cancellation_codes(err: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction ("None" for items that were fine)."""
    if err.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    reasons = err.response.get("CancellationReasons") or []
    if not reasons:
        # Some emulators only put the reasons in the message: "[ConditionalCheckFailed, None]".
        msg = err.response.get("Error", {}).get("Message", "")
        if "[" in msg:
            return [r.strip() for r in msg[msg.index("[") + 1 : msg.rindex("]")].split(",")]
    return [r.get("Code", "None") for r in reasons]


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


_BATCH = 25  # BatchWriteItem's limit
_BATCH_TRIES = 10


def backoff(first: float = 0.05, most: float = 1.0) -> Iterator[float]:
    """The pauses between retries: ``first``, doubling up to ``most``, without end (the caller
    bounds the tries or the time). Unprocessed batch items and a busy session's lease wait by it."""
    pause = first
    while True:
        yield pause
        pause = min(pause * 2, most)


def retry_unprocessed(send: Callable[[dict[str, Any]], dict[str, Any]], request: dict[str, object]) -> dict[str, Any]:
    """Sends a batch request, then what DynamoDB left unprocessed (``send`` returns it: its
    UnprocessedItems or UnprocessedKeys), up to ``_BATCH_TRIES`` times with ``backoff`` between;
    returns what is still unprocessed ({} when everything went through)."""
    pauses = backoff()
    for attempt in range(_BATCH_TRIES):
        request = send(request) or {}
        if not request:
            break
        if attempt < _BATCH_TRIES - 1:
            time.sleep(next(pauses))
    return request


class Cancelled(Exception):
    """A transaction DynamoDB cancelled; `codes` are its per-item reasons ("None" for fine items)."""

    def __init__(self, codes: list[str] | None = None):
        super().__init__(f"the transaction was cancelled: {codes}")
        self.codes = codes or []


class IdempotencyMismatch(Exception):
    """A transaction's token was used in the last 10 minutes by a different request."""


class ConditionFailed(Cancelled):
    """A conditional write did not apply. `item` is the stored item when the call asked for it
    (None when there is none); `codes` are a cancelled transaction's per-item reasons."""

    def __init__(self, item: dict[str, object] | None = None, codes: list[str] | None = None):
        super().__init__(codes)
        self.item = item

    def failed_at(self, index: int) -> bool:
        return index < len(self.codes) and self.codes[index] == "ConditionalCheckFailed"


def _attrs(values: Mapping[str, object] | None) -> dict[str, object]:
    return {"ExpressionAttributeValues": serialize(values)} if values else {}


def _names(names: dict[str, str] | None) -> dict[str, object]:
    return {"ExpressionAttributeNames": names} if names else {}


class Table:
    """One table, one lazily created client (injectable for tests)."""

    def __init__(self, name: str, client: object = None):
        self.name = name
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("dynamodb")
        return self._client

    # --- single items ---------------------------------------------------------------------------
    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        out = self.client.get_item(TableName=self.name, Key=serialize({"PK": pk, "SK": sk}), ConsistentRead=True)
        return deserialize(out["Item"]) if "Item" in out else None

    def get_many(self, key_pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """BatchGetItem (strongly consistent) of up to 100 keys, retrying unprocessed keys."""
        if not key_pairs:
            return []
        request: dict[str, Any] = {
            self.name: {"Keys": [serialize({"PK": pk, "SK": sk}) for pk, sk in key_pairs], "ConsistentRead": True}
        }
        found: list[dict[str, Any]] = []

        def send(keys: Mapping[str, object]) -> dict[str, object]:
            out = self.client.batch_get_item(RequestItems=keys)
            found.extend(deserialize(i) for i in out.get("Responses", {}).get(self.name, []))
            return out.get("UnprocessedKeys") or {}

        retry_unprocessed(send, request)
        return found

    def put(
        self,
        item: Mapping[str, object],
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Mapping[str, object] | None = None,
    ) -> None:
        args: dict[str, Any] = {"TableName": self.name, "Item": serialize(item), **_names(names), **_attrs(values)}
        if condition:
            args["ConditionExpression"] = condition
        self._call("put_item", args)

    def update(
        self,
        pk: str,
        sk: str,
        expression: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Mapping[str, object] | None = None,
        old_on_failure: bool = False,
        returns: str = "ALL_NEW",
    ) -> dict[str, Any]:
        """UpdateItem; returns the item as it is now (`returns="NONE"`: nothing, for a caller whose
        policy may not read the item back). With `old_on_failure`, a failed condition carries the
        stored item (or None when there is none)."""
        args: dict[str, Any] = {
            "TableName": self.name,
            "Key": serialize({"PK": pk, "SK": sk}),
            "UpdateExpression": expression,
            "ReturnValues": returns,
            **_names(names),
            **_attrs(values),
        }
        if condition:
            args["ConditionExpression"] = condition
        if old_on_failure:
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        out = self._call("update_item", args)
        return deserialize(out.get("Attributes") or {})

    def set_fields(self, pk: str, sk: str, changes: Mapping[str, object]) -> dict[str, object]:
        """Sets the given attributes of an existing item (None removes one); ConditionFailed if
        the item does not exist."""
        expression, names, values = set_expression(changes)
        return self.update(pk, sk, expression, condition="attribute_exists(PK)", names=names, values=values)

    def delete(
        self,
        pk: str,
        sk: str,
        *,
        condition: str | None = None,
        values: Mapping[str, object] | None = None,
        old_on_failure: bool = False,
        names: dict[str, str] | None = None,
        returning: bool = False,
    ) -> dict[str, Any] | None:
        """DeleteItem; with `returning`, the item it deleted (None when there was none)."""
        args: dict[str, Any] = {"TableName": self.name, "Key": serialize({"PK": pk, "SK": sk}), **_names(names), **_attrs(values)}
        if returning:
            args["ReturnValues"] = "ALL_OLD"
        if condition:
            args["ConditionExpression"] = condition
        if old_on_failure:
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        out = self._call("delete_item", args)
        return deserialize(out["Attributes"]) if out.get("Attributes") else None

    def _call(self, operation: str, args: Mapping[str, object]) -> Any:
        try:
            return getattr(self.client, operation)(**args)
        except aws_clients.ClientError as err:
            if condition_failed(err):
                old = err.response.get("Item")
                raise ConditionFailed(deserialize(old) if old else None) from None
            raise

    # --- queries --------------------------------------------------------------------------------
    def query(
        self,
        pk: str,
        *,
        sk_prefix: str | None = None,
        sk_after: str | None = None,
        index: str | None = None,
        limit: int | None = None,
        token: str | None = None,
        newest_first: bool = False,
        projection: str | None = None,
        consistent: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page. `token` is a paging token this partition issued (anything else is a 400)."""
        pk_attr = f"{index}PK" if index else "PK"
        key_attrs = frozenset({"PK", "SK", f"{index}PK", f"{index}SK"} if index else {"PK", "SK"})
        start = decode_token(token, partition_attr=pk_attr, partition_value=pk, key_attrs=key_attrs)
        if start is not None:
            # DynamoDB refuses a start key outside the query's sort-key range (a 500 if let through).
            sort_value = str(start[f"{index}SK" if index else "SK"]["S"])
            if (sk_prefix and not sort_value.startswith(sk_prefix)) or (sk_after and sort_value <= sk_after):
                raise BadRequest("nextToken is not a token this list issued", field="nextToken", code="invalid_token")
        # One item more than the page: a token only when another item follows, so a page never
        # holds more than `limit` and a token never leads to an empty page.
        items, last = self._page(
            pk,
            sk_prefix=sk_prefix,
            sk_after=sk_after,
            index=index,
            limit=limit + 1 if limit else None,
            start=start,
            newest_first=newest_first,
            projection=projection,
            consistent=consistent,
        )
        if limit and len(items) > limit:
            items = items[:limit]
            last = serialize({attr: items[-1][attr] for attr in key_attrs})
        return items, encode_token(last)

    def query_all(self, pk: str, *, max_items: int | None = None, **kw: Any) -> list[dict[str, Any]]:
        """Every page (or the first `max_items` items in the query's order)."""
        items: list[dict[str, Any]] = []
        start = None
        while True:
            limit = min(1000, max_items - len(items)) if max_items is not None else None
            page, start = self._page(pk, start=start, limit=limit, **kw)
            items += page
            if not start or (max_items is not None and len(items) >= max_items):
                return items

    def _page(
        self,
        pk: str,
        *,
        sk_prefix: str | None = None,
        sk_after: str | None = None,
        sk_before: str | None = None,
        index: str | None = None,
        limit: int | None = None,
        start: Mapping[str, object] | None = None,
        newest_first: bool = False,
        projection: str | None = None,
        attributes: Sequence[str] = (),
        consistent: bool = False,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        pk_attr = f"{index}PK" if index else "PK"
        sk_attr = f"{index}SK" if index else "SK"
        expr = "#pk = :pk"
        names = {"#pk": pk_attr}
        values: dict[str, Any] = {":pk": pk}
        if sk_prefix:
            expr += " AND begins_with(#sk, :sk)"
            names["#sk"] = sk_attr
            values[":sk"] = sk_prefix
        elif sk_after and sk_before:  # both ends, inclusive
            expr += " AND #sk BETWEEN :sk AND :sk2"
            names["#sk"] = sk_attr
            values[":sk"], values[":sk2"] = sk_after, sk_before
        elif sk_after:
            expr += " AND #sk > :sk"
            names["#sk"] = sk_attr
            values[":sk"] = sk_after
        elif sk_before:
            expr += " AND #sk < :sk"
            names["#sk"] = sk_attr
            values[":sk"] = sk_before
        args: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": expr,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": serialize(values),
            "ScanIndexForward": not newest_first,
        }
        if index:
            args["IndexName"] = index
        if limit:
            args["Limit"] = limit
        if projection:
            args["ProjectionExpression"] = projection
        elif attributes:  # by placeholder: `key`, `value`, `source` are reserved words
            names.update({f"#a{i}": name for i, name in enumerate(attributes)})
            args["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(attributes)))
        if consistent:
            args["ConsistentRead"] = True
        if start:
            args["ExclusiveStartKey"] = start
        out = self.client.query(**args)
        return [deserialize(i) for i in out.get("Items", [])], out.get("LastEvaluatedKey")

    def count(self, pk: str, *, sk_prefix: str, row_filter: str | None = None, names: dict[str, str] | None = None) -> int:
        """How many items of a partition's `sk_prefix` (matching `row_filter`), read consistently;
        COUNT pages carry no items, but DynamoDB still reads (and bills) each one."""
        args: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
            "ExpressionAttributeValues": serialize({":pk": pk, ":sk": sk_prefix}),
            "Select": "COUNT",
            "ConsistentRead": True,
            **_names(names),
        }
        if row_filter:
            args["FilterExpression"] = row_filter
        total = 0
        while True:
            out = self.client.query(**args)
            total += int(out.get("Count", 0))
            if not out.get("LastEvaluatedKey"):
                return total
            args["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    # --- several items --------------------------------------------------------------------------
    def transact(self, operations: Sequence[Mapping[str, object]], *, token: str | None = None) -> None:
        """TransactWriteItems of operations built with `put_op`, `update_op`, `check_op`; a
        cancelled transaction whose reasons name a failed condition raises ConditionFailed.

        `token` (ClientRequestToken, at most 36 characters): DynamoDB applies a transaction with
        the same token at most once in 10 minutes and answers a repeat with success, so a retry
        after a lost response does not fail its own conditions."""
        try:
            args: dict[str, Any] = {"TransactItems": operations}
            if token:
                args["ClientRequestToken"] = token
            self.client.transact_write_items(**args)
        except aws_clients.ClientError as err:
            codes = cancellation_codes(err)
            if "ConditionalCheckFailed" in codes:
                raise ConditionFailed(codes=codes) from None
            if codes:
                raise Cancelled(codes) from None
            if err.response.get("Error", {}).get("Code") == "IdempotentParameterMismatchException":
                raise IdempotencyMismatch() from None
            raise

    def put_op(
        self,
        item: Mapping[str, object],
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        op: dict[str, Any] = {"TableName": self.name, "Item": serialize(item), **_names(names), **_attrs(values)}
        if condition:
            op["ConditionExpression"] = condition
        return {"Put": op}

    def update_op(
        self,
        pk: str,
        sk: str,
        expression: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        op: dict[str, Any] = {
            "TableName": self.name,
            "Key": serialize({"PK": pk, "SK": sk}),
            "UpdateExpression": expression,
            **_names(names),
            **_attrs(values),
        }
        if condition:
            op["ConditionExpression"] = condition
        return {"Update": op}

    def delete_op(
        self, pk: str, sk: str, *, condition: str | None = None, values: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        op: dict[str, Any] = {"TableName": self.name, "Key": serialize({"PK": pk, "SK": sk}), **_attrs(values)}
        if condition:
            op["ConditionExpression"] = condition
        return {"Delete": op}

    def check_op(self, pk: str, sk: str, condition: str = "attribute_exists(PK)") -> dict[str, object]:
        return {
            "ConditionCheck": {"TableName": self.name, "Key": serialize({"PK": pk, "SK": sk}), "ConditionExpression": condition}
        }

    def batch_write(self, *, puts: Iterable[Mapping[str, object]] = (), deletes: Iterable[tuple[str, str]] = ()) -> None:
        """BatchWriteItem in batches of 25, retrying unprocessed items with backoff (the one
        batch path of the project). Raises if DynamoDB keeps items unprocessed."""
        requests = [{"PutRequest": {"Item": serialize(item)}} for item in puts]
        requests += [{"DeleteRequest": {"Key": serialize({"PK": pk, "SK": sk})}} for pk, sk in deletes]
        for batch in chunks(requests, _BATCH):
            pending = retry_unprocessed(
                lambda items: self.client.batch_write_item(RequestItems=items).get("UnprocessedItems") or {},
                {self.name: batch},
            )
            if pending:
                raise RuntimeError(f"DynamoDB left {len(pending.get(self.name, []))} batch writes unprocessed")

    def delete_all(self, pk: str, **kw: Any) -> int:
        """Deletes every item of a partition (or of its `sk_prefix`); returns how many."""
        items = self.query_all(pk, projection="PK, SK", **kw)
        self.batch_write(deletes=[(i["PK"], i["SK"]) for i in items])
        return len(items)


def query_after(
    table: Table, pk: str, *, index: str, after: str | None, limit: int, attributes: Sequence[str]
) -> tuple[list[dict[str, object]], bool]:
    """Up to `limit` items of the index key `pk` whose sort key comes after `after` (None: from
    the first), each with only `attributes` and its sort key (every attribute: none named), and
    whether more follow. A page is continued from its last item's sort key (which must be unique
    in the index) rather than a token, so the keys of the table and the index need not be read:
    a projected page carries what its reader uses. One item more than the page is read, as
    `Table.query` does."""
    names = [*dict.fromkeys([*attributes, f"{index}SK"])] if attributes else []
    items, last = table._page(pk, sk_after=after, index=index, limit=limit + 1, attributes=names)
    return items[:limit], len(items) > limit or last is not None  # DynamoDB stops at 1 MB read too
