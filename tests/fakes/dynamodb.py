"""An in-memory DynamoDB client (the low-level boto3 one, wire-format attribute values).

Why a fake and not moto here: every behaviour test of a turn makes dozens of table calls; this
answers each in microseconds, with botocore's own parameter validation (from the service model),
its exception classes and the same error codes and messages the repositories branch on. What it
models, like DynamoDB (checked against moto by tests/contract):

- tables from CreateTable (key schema, attribute definitions, global secondary indexes with their
  projections), Describe/UpdateTimeToLive, UpdateContinuousBackups, DescribeTable;
- GetItem, PutItem, UpdateItem, DeleteItem with ConditionExpression, ReturnValues and
  ReturnValuesOnConditionCheckFailure; BatchGetItem (100 keys), BatchWriteItem (25 requests),
  TransactWriteItems (100 operations, one per item, all-or-nothing, CancellationReasons, and
  ClientRequestToken idempotency as DynamoDB keeps it); Query on the table and on GSIs (key
  conditions, FilterExpression, ProjectionExpression, ScanIndexForward, Limit, paging keys);
- the expression language the project uses and its neighbours: comparisons, BETWEEN, IN, AND/OR/
  NOT, attribute_exists/not_exists/type, begins_with, contains, size; SET (+, -, if_not_exists,
  list_append), REMOVE, ADD, DELETE; nested paths; reserved words (moto's list), unused or
  undefined placeholders, key attributes in an update, type mismatches on keys and index keys,
  empty key strings and the 400 KB item limit all give DynamoDB's ValidationException.

Not modelled: the 1 MB page limit, Scan, local secondary indexes, streams, TTL expiry, capacity.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources as package_files
from typing import Any

from botocore.exceptions import ClientError

from tests.fakes._botocore import FakeClient, modelled_error
from tests.fakes._botocore import ok as _ok

SERVICE = "dynamodb"
MAX_ITEM_BYTES = 400 * 1024
TOKEN_TTL_S = 600  # how long DynamoDB remembers a transaction's ClientRequestToken


@functools.cache
def _reserved_words() -> frozenset[str]:
    """DynamoDB's reserved words (moto ships the list AWS publishes)."""
    text = package_files.files("moto.dynamodb.parsing").joinpath("reserved_keywords.txt").read_text()
    return frozenset(word.strip().upper() for word in text.splitlines() if word.strip())


class _Invalid(Exception):
    """A ValidationException to raise from deep inside expression handling."""


def _error(operation: str, code: str, message: str, *, status: int = 400, **extra: Any) -> ClientError:
    return modelled_error(SERVICE, operation, code, message, status=status, **extra)


# --------------------------------------------------------------------------- attribute values
def _number(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise _Invalid(f"A value provided cannot be converted into a number: {text}") from None
    if not value.is_finite():
        raise _Invalid("A value provided cannot be converted into a number")
    return value


def _number_text(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _kind(av: dict[str, Any]) -> str:
    if not isinstance(av, dict) or len(av) != 1:
        raise _Invalid(
            "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes"
        )
    return next(iter(av))


def _canonical(av: dict[str, Any]) -> dict[str, Any]:
    """A validated, normalised copy of an attribute value (numbers in canonical form)."""
    kind = _kind(av)
    value = av[kind]
    if kind == "N":
        return {"N": _number_text(_number(value))}
    if kind == "NS":
        if not value:
            raise _Invalid("One or more parameter values were invalid: An number set  may not be empty")
        numbers = {_number(v) for v in value}
        if len(numbers) != len(value):
            raise _Invalid("Input collection contains duplicates")
        return {"NS": [_number_text(n) for n in numbers]}
    if kind in ("SS", "BS"):
        if not value:
            raise _Invalid("One or more parameter values were invalid: An string set  may not be empty")
        if len(set(value)) != len(value):
            raise _Invalid("Input collection contains duplicates")
        return {kind: list(value)}
    if kind == "M":
        return {"M": {k: _canonical(v) for k, v in value.items()}}
    if kind == "L":
        return {"L": [_canonical(v) for v in value]}
    if kind == "B":
        return {"B": bytes(value) if not isinstance(value, str) else value.encode()}
    return {kind: value}


def _comparable(av: dict[str, Any]) -> tuple[str, Any]:
    """(type, python value) for comparisons; sets compare as frozensets."""
    kind = _kind(av)
    value = av[kind]
    if kind == "N":
        return kind, Decimal(value)
    if kind == "NS":
        return kind, frozenset(Decimal(v) for v in value)
    if kind in ("SS", "BS"):
        return kind, frozenset(value)
    if kind == "M":
        return kind, {k: _comparable(v) for k, v in value.items()}
    if kind == "L":
        return kind, [_comparable(v) for v in value]
    return kind, value


def _equal(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return a is not None and b is not None and _comparable(a) == _comparable(b)


def _size(av: dict[str, Any]) -> int:
    kind = _kind(av)
    value = av[kind]
    if kind == "S":
        return len(value.encode())
    if kind == "N":
        return len(value) // 2 + 2
    if kind == "B":
        return len(value)
    if kind in ("SS", "BS"):
        return sum(len(v.encode()) if isinstance(v, str) else len(v) for v in value)
    if kind == "NS":
        return sum(len(v) // 2 + 2 for v in value)
    if kind == "M":
        return 3 + sum(len(k.encode()) + _size(v) + 1 for k, v in value.items())
    if kind == "L":
        return 3 + sum(_size(v) + 1 for v in value)
    return 1


def _item_size(item: dict[str, dict[str, Any]]) -> int:
    return sum(len(name.encode()) + _size(value) for name, value in item.items())


# --------------------------------------------------------------------------- expressions
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+)|(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|<=|>=|[=<>(),.\[\]+\-]))"
)
_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size"}
_UPDATE_FUNCTIONS = {"if_not_exists", "list_append"}
_COMPARATORS = {"=", "<>", "<", "<=", ">", ">="}


@dataclass
class _Tokens:
    items: list[tuple[str, str]]
    pos: int = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        i = self.pos + offset
        return self.items[i] if i < len(self.items) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise _Invalid("Invalid expression: unexpected end of input")
        self.pos += 1
        return token

    def expect(self, text: str) -> None:
        kind, got = self.take()
        if got.upper() != text.upper():
            raise _Invalid(f'Invalid expression: Syntax error; token: "{got}", near: expected "{text}"')

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token[1].upper() == text.upper()


def _tokenize(expression: str) -> _Tokens:
    out: list[tuple[str, str]] = []
    pos = 0
    expression = expression.rstrip()
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if not match or match.end() == pos:
            raise _Invalid(
                f'Invalid expression: Syntax error; token: "{expression[pos : pos + 1]}", near: "{expression[pos : pos + 10]}"'
            )
        kind = match.lastgroup or "op"
        out.append((kind, match.group(kind)))
        pos = match.end()
    if not out:
        raise _Invalid("Invalid expression: The expression can not be empty;")
    return _Tokens(out)


@dataclass
class _Names:
    """Placeholder resolution shared by all expressions of one call (tracks which were used)."""

    names: dict[str, str]
    values: dict[str, dict[str, Any]]
    used_names: set[str] = field(default_factory=set)
    used_values: set[str] = field(default_factory=set)

    def name(self, token: tuple[str, str]) -> str:
        kind, text = token
        if kind == "name":
            if text not in self.names:
                raise _Invalid(
                    f"Value provided in ExpressionAttributeNames unused in expressions: An expression attribute name used in the document path is not defined; attribute name: {text}"
                )
            self.used_names.add(text)
            return self.names[text]
        if kind != "word":
            raise _Invalid(f'Invalid expression: Syntax error; token: "{text}"')
        if text.upper() in _reserved_words():
            raise _Invalid(f"Invalid expression: Attribute name is a reserved keyword; reserved keyword: {text}")
        return text

    def value(self, text: str) -> dict[str, Any]:
        if text not in self.values:
            raise _Invalid(
                f"Invalid expression: An expression attribute value used in expression is not defined; attribute value: {text}"
            )
        self.used_values.add(text)
        return self.values[text]

    def check_all_used(self) -> None:
        unused_names = sorted(set(self.names) - self.used_names)
        if unused_names:
            raise _Invalid(
                f"Value provided in ExpressionAttributeNames unused in expressions: keys: {{{', '.join(unused_names)}}}"
            )
        unused_values = sorted(set(self.values) - self.used_values)
        if unused_values:
            raise _Invalid(
                f"Value provided in ExpressionAttributeValues unused in expressions: keys: {{{', '.join(unused_values)}}}"
            )


Path = tuple[str | int, ...]


def _parse_path(tokens: _Tokens, names: _Names) -> Path:
    parts: list[str | int] = [names.name(tokens.take())]
    while True:
        if tokens.at(".") and tokens.peek(1) and tokens.peek(1)[0] in ("word", "name"):  # type: ignore[index]
            tokens.take()
            parts.append(names.name(tokens.take()))
        elif tokens.at("["):
            tokens.take()
            kind, index = tokens.take()
            if kind != "number":
                raise _Invalid("Invalid expression: a list index must be a number")
            tokens.expect("]")
            parts.append(int(index))
        else:
            return tuple(parts)


def _resolve(item: dict[str, Any], path: Path) -> dict[str, Any] | None:
    current: Any = {"M": item}
    for part in path:
        if isinstance(part, str):
            if "M" not in current or part not in current["M"]:
                return None
            current = current["M"][part]
        else:
            if "L" not in current or part >= len(current["L"]):
                return None
            current = current["L"][part]
    return dict(current)


# Conditions are parsed to closures item -> bool (operands to item -> AttributeValue | None).
Operand = Any
Condition = Any


def _parse_operand(tokens: _Tokens, names: _Names, *, update: bool = False) -> Operand:
    kind, text = tokens.peek() or ("", "")
    if kind == "value":
        tokens.take()
        value = names.value(text)
        return lambda item: value
    if kind == "word" and tokens.peek(1) and tokens.peek(1)[1] == "(":  # type: ignore[index]
        fn = text.lower()
        if fn == "size" and not update:
            tokens.take()
            tokens.expect("(")
            path = _parse_path(tokens, names)
            tokens.expect(")")

            def size(item: dict[str, Any]) -> dict[str, Any] | None:
                av = _resolve(item, path)
                if av is None:
                    return None
                kind = _kind(av)
                if kind in ("S",):
                    return {"N": str(len(av["S"]))}
                if kind == "B":
                    return {"N": str(len(av["B"]))}
                if kind in ("SS", "NS", "BS", "L", "M"):
                    return {"N": str(len(av[kind]))}
                raise _Invalid(
                    f"Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: size, operand type: {kind}"
                )

            return size
        if update and fn in _UPDATE_FUNCTIONS:
            tokens.take()
            tokens.expect("(")
            if fn == "if_not_exists":
                path = _parse_path(tokens, names)
                tokens.expect(",")
                default = _parse_set_value(tokens, names)
                tokens.expect(")")
                return lambda item: _resolve(item, path) or default(item)
            first = _parse_set_value(tokens, names)
            tokens.expect(",")
            second = _parse_set_value(tokens, names)
            tokens.expect(")")

            def list_append(item: dict[str, Any]) -> dict[str, Any]:
                a, b = first(item), second(item)
                if a is None or b is None or "L" not in a or "L" not in b:
                    raise _Invalid(
                        "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: list_append"
                    )
                return {"L": [*a["L"], *b["L"]]}

            return list_append
        raise _Invalid(f"Invalid expression: Invalid function name; function: {text}")
    path = _parse_path(tokens, names)
    return lambda item: _resolve(item, path)


def _compare(op: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if op == "=":
        return _equal(a, b)
    if op == "<>":
        return not _equal(a, b)  # a missing attribute is "not equal" (DynamoDB and moto agree)
    if a is None or b is None:
        return False
    (ka, va), (kb, vb) = _comparable(a), _comparable(b)
    if ka != kb or ka not in ("S", "N", "B"):
        return False
    return {"<": va < vb, "<=": va <= vb, ">": va > vb, ">=": va >= vb}[op]


def _parse_condition(tokens: _Tokens, names: _Names) -> Condition:
    return _parse_chain(tokens, names, "OR", _parse_and, any)  # OR binds loosest


def _parse_and(tokens: _Tokens, names: _Names) -> Condition:
    return _parse_chain(tokens, names, "AND", _parse_not, all)


def _parse_chain(tokens: _Tokens, names: _Names, word: str, parse_part: Any, combine: Any) -> Condition:
    parts = [parse_part(tokens, names)]
    while tokens.at(word):
        tokens.take()
        parts.append(parse_part(tokens, names))
    return parts[0] if len(parts) == 1 else (lambda item: combine(part(item) for part in parts))


def _parse_not(tokens: _Tokens, names: _Names) -> Condition:
    if tokens.at("NOT"):
        tokens.take()
        inner = _parse_not(tokens, names)
        return lambda item: not inner(item)
    return _parse_primary(tokens, names)


def _parse_function(fn: str, tokens: _Tokens, names: _Names) -> Condition:
    """attribute_exists / attribute_not_exists / attribute_type / begins_with / contains."""
    tokens.take()
    tokens.expect("(")
    path = _parse_path(tokens, names)
    if fn == "attribute_exists":
        tokens.expect(")")
        return lambda item: _resolve(item, path) is not None
    if fn == "attribute_not_exists":
        tokens.expect(")")
        return lambda item: _resolve(item, path) is None
    tokens.expect(",")
    operand = _parse_operand(tokens, names)
    tokens.expect(")")
    if fn == "attribute_type":
        return lambda item: (av := _resolve(item, path)) is not None and _kind(av) == (operand(item) or {}).get("S")
    if fn == "begins_with":

        def begins_with(item: dict[str, Any]) -> bool:
            av, prefix = _resolve(item, path), operand(item)
            if av is None or prefix is None or _kind(av) != _kind(prefix) or _kind(av) not in ("S", "B"):
                return False
            return bool(av[_kind(av)].startswith(prefix[_kind(prefix)]))

        return begins_with

    def contains(item: dict[str, Any]) -> bool:
        av, needle = _resolve(item, path), operand(item)
        if av is None or needle is None:
            return False
        kind = _kind(av)
        if kind in ("S", "B"):
            return _kind(needle) == kind and needle[kind] in av[kind]
        if kind in ("SS", "NS", "BS"):
            member = {"SS": "S", "NS": "N", "BS": "B"}[kind]
            return _kind(needle) == member and any(_equal({member: m}, needle) for m in av[kind])
        if kind == "L":
            return any(_equal(member, needle) for member in av["L"])
        return False

    return contains


def _parse_primary(tokens: _Tokens, names: _Names) -> Condition:
    if tokens.at("("):
        tokens.take()
        inner = _parse_condition(tokens, names)
        tokens.expect(")")
        return inner
    kind, text = tokens.peek() or ("", "")
    fn = text.lower()
    if kind == "word" and fn in _FUNCTIONS - {"size"} and tokens.peek(1) and tokens.peek(1)[1] == "(":  # type: ignore[index]
        return _parse_function(fn, tokens, names)
    left = _parse_operand(tokens, names)
    if tokens.at("BETWEEN"):
        tokens.take()
        low = _parse_operand(tokens, names)
        tokens.expect("AND")
        high = _parse_operand(tokens, names)
        return lambda item: _compare(">=", left(item), low(item)) and _compare("<=", left(item), high(item))
    if tokens.at("IN"):
        tokens.take()
        tokens.expect("(")
        options = [_parse_operand(tokens, names)]
        while tokens.at(","):
            tokens.take()
            options.append(_parse_operand(tokens, names))
        tokens.expect(")")
        return lambda item: any(_equal(left(item), option(item)) for option in options)
    _, op = tokens.take()
    if op not in _COMPARATORS:
        raise _Invalid(f'Invalid expression: Syntax error; token: "{op}"')
    right = _parse_operand(tokens, names)
    return lambda item: _compare(op, left(item), right(item))


def _condition(expression: str | None, names: _Names) -> Condition:
    if expression is None:
        return lambda item: True
    tokens = _tokenize(expression)
    condition = _parse_condition(tokens, names)
    if tokens.peek() is not None:
        raise _Invalid(f'Invalid expression: Syntax error; token: "{tokens.peek()[1]}"')  # type: ignore[index]
    return condition


def _parse_set_value(tokens: _Tokens, names: _Names) -> Operand:
    first = _parse_operand(tokens, names, update=True)
    if tokens.at("+") or tokens.at("-"):
        _, op = tokens.take()
        second = _parse_operand(tokens, names, update=True)

        def arithmetic(item: dict[str, Any]) -> dict[str, Any]:
            a, b = first(item), second(item)
            if a is None or b is None:
                raise _Invalid("The provided expression refers to an attribute that does not exist in the item")
            if "N" not in a or "N" not in b:
                raise _Invalid(f"An operand in the update expression has an incorrect data type; operator or function: {op}")
            result = Decimal(a["N"]) + Decimal(b["N"]) if op == "+" else Decimal(a["N"]) - Decimal(b["N"])
            return {"N": _number_text(result)}

        return arithmetic
    return first


@dataclass
class _Update:
    sets: list[tuple[Path, Operand]] = field(default_factory=list)
    removes: list[Path] = field(default_factory=list)
    adds: list[tuple[Path, Operand]] = field(default_factory=list)
    deletes: list[tuple[Path, Operand]] = field(default_factory=list)

    def paths(self) -> list[Path]:
        return [p for p, _ in self.sets] + self.removes + [p for p, _ in self.adds] + [p for p, _ in self.deletes]


def _parse_update(expression: str, names: _Names) -> _Update:
    tokens = _tokenize(expression)
    update = _Update()
    seen: set[str] = set()
    while tokens.peek() is not None:
        _, clause = tokens.take()
        clause = clause.upper()
        if clause not in ("SET", "REMOVE", "ADD", "DELETE"):
            raise _Invalid(f'Invalid UpdateExpression: Syntax error; token: "{clause}"')
        if clause in seen:
            raise _Invalid(f'Invalid UpdateExpression: The "{clause}" section can only be used once in an update expression;')
        seen.add(clause)
        while True:
            path = _parse_path(tokens, names)
            if clause == "SET":
                tokens.expect("=")
                update.sets.append((path, _parse_set_value(tokens, names)))
            elif clause == "REMOVE":
                update.removes.append(path)
            else:
                kind, text = tokens.take()
                if kind != "value":
                    raise _Invalid(f"Invalid UpdateExpression: {clause} takes a value placeholder")
                value = names.value(text)
                (update.adds if clause == "ADD" else update.deletes).append((path, lambda item, v=value: v))
            if not tokens.at(","):
                break
            tokens.take()
    paths = update.paths()
    for i, a in enumerate(paths):
        for b in paths[i + 1 :]:
            if a[: len(b)] == b or b[: len(a)] == a:
                raise _Invalid(
                    f"Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [{a[0]}], path two: [{b[0]}]"
                )
    return update


def _set_path(item: dict[str, Any], path: Path, value: dict[str, Any] | None) -> None:
    """Sets (or with None removes) the attribute at `path` in place; its parent must exist."""
    container: Any = item
    for part in path[:-1]:
        try:
            node = container[part]
        except (KeyError, IndexError, TypeError):
            raise _Invalid("The document path provided in the update expression is invalid for update") from None
        container = node.get("M", node.get("L"))
        if container is None:
            raise _Invalid("The document path provided in the update expression is invalid for update")
    last = path[-1]
    if isinstance(last, int) != isinstance(container, list):
        raise _Invalid("The document path provided in the update expression is invalid for update")
    if isinstance(container, list):
        assert isinstance(last, int)
        if value is None:
            if last < len(container):
                del container[last]
        elif last < len(container):
            container[last] = value
        else:
            container.append(value)
    elif value is None:
        container.pop(last, None)
    else:
        container[last] = value


def _apply_update(item: dict[str, Any], update: _Update) -> dict[str, Any]:
    """The item after `update` (all right-hand sides read the item as it was before)."""
    before = copy.deepcopy(item)
    after = copy.deepcopy(item)
    for path, operand in update.sets:
        value = operand(before)
        if value is None:
            raise _Invalid("The provided expression refers to an attribute that does not exist in the item")
        _set_path(after, path, copy.deepcopy(value))
    for path in sorted(update.removes, key=lambda p: [-x if isinstance(x, int) else 0 for x in p]):
        _set_path(after, path, None)
    for path, operand in update.adds:
        value, current = operand(before), _resolve(before, path)
        kind = _kind(value)
        if current is None:
            _set_path(after, path, copy.deepcopy(value))
        elif kind == "N" and "N" in current:
            _set_path(after, path, {"N": _number_text(Decimal(current["N"]) + Decimal(value["N"]))})
        elif kind in ("SS", "NS", "BS") and kind in current:
            merged = (
                _canonical({kind: list({*current[kind], *value[kind]})})
                if kind != "NS"
                else {"NS": current[kind] + [v for v in value[kind] if not any(Decimal(v) == Decimal(c) for c in current[kind])]}
            )
            _set_path(after, path, merged)
        else:
            raise _Invalid("An operand in the update expression has an incorrect data type")
    for path, operand in update.deletes:
        value, current = operand(before), _resolve(before, path)
        kind = _kind(value)
        if current is None:
            continue
        if kind not in ("SS", "NS", "BS") or kind not in current:
            raise _Invalid("An operand in the update expression has an incorrect data type")
        left = [m for m in current[kind] if not any(_equal({kind[0]: m}, {kind[0]: v}) for v in value[kind])]
        _set_path(after, path, {kind: left} if left else None)
    return after


def _projection(expression: str | None, names: _Names) -> list[Path] | None:
    if expression is None:
        return None
    tokens = _tokenize(expression)
    paths = [_parse_path(tokens, names)]
    while tokens.at(","):
        tokens.take()
        paths.append(_parse_path(tokens, names))
    if tokens.peek() is not None:
        raise _Invalid("Invalid ProjectionExpression: Syntax error")
    return paths


def _project(item: dict[str, Any], paths: list[Path] | None) -> dict[str, Any]:
    if paths is None:
        return copy.deepcopy(item)
    out: dict[str, Any] = {}
    for path in paths:
        value = _resolve(item, path)
        if value is None:
            continue
        if len(path) == 1:
            out[path[0]] = copy.deepcopy(value)  # type: ignore[index]
        else:  # nested projections keep the enclosing maps (lists are not rebuilt here)
            node = out
            for part in path[:-1]:
                node = node.setdefault(part, {"M": {}})["M"]  # type: ignore[call-overload]
            node[path[-1]] = copy.deepcopy(value)  # type: ignore[index]
    return out


# --------------------------------------------------------------------------- tables
@dataclass
class _Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: dict[str, Any]


@dataclass
class _Table:
    name: str
    arn: str
    key_schema: list[dict[str, str]]
    attributes: dict[str, str]
    indexes: dict[str, _Index]
    description: dict[str, Any]
    items: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    ttl: dict[str, Any] = field(default_factory=lambda: {"TimeToLiveStatus": "DISABLED"})
    pitr: bool = False

    @property
    def hash_key(self) -> str:
        return next(k["AttributeName"] for k in self.key_schema if k["KeyType"] == "HASH")

    @property
    def range_key(self) -> str | None:
        return next((k["AttributeName"] for k in self.key_schema if k["KeyType"] == "RANGE"), None)

    def key_names(self) -> list[str]:
        return [self.hash_key] + ([self.range_key] if self.range_key else [])

    def key_of(self, key: dict[str, Any]) -> tuple[Any, ...]:
        """The storage key of `key`, which must hold exactly the table's key attributes."""
        if set(key) != set(self.key_names()):
            raise _Invalid("The provided key element does not match the schema")
        return tuple(self._key_value(name, key[name]) for name in self.key_names())

    def _key_value(self, name: str, av: dict[str, Any]) -> Any:
        kind = _kind(av)
        expected = self.attributes[name]
        if kind != expected:
            raise _Invalid(
                f"One or more parameter values were invalid: Type mismatch for key {name} expected: {expected} actual: {kind}"
            )
        if kind in ("S", "B") and len(av[kind]) == 0:
            raise _Invalid(
                f"One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: {name}"
            )
        return _comparable(av)[1]

    def check_item(self, item: dict[str, Any]) -> tuple[Any, ...]:
        """Validates a whole item (keys, index key types, size); returns its storage key."""
        for name in self.key_names():
            if name not in item:
                raise _Invalid(f"One or more parameter values were invalid: Missing the key {name} in the item")
        for index in self.indexes.values():
            for name in filter(None, (index.hash_key, index.range_key)):
                if name in item:
                    kind = _kind(item[name])
                    if kind != self.attributes[name]:
                        raise _Invalid(
                            f"One or more parameter values were invalid: Type mismatch for Index Key {name} Expected: {self.attributes[name]} Actual: {kind} IndexName: {index.name}"
                        )
                    if kind in ("S", "B") and len(item[name][kind]) == 0:
                        raise _Invalid(
                            f"One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: {index.name}, IndexKey: {name}"
                        )
        if _item_size(item) > MAX_ITEM_BYTES:
            raise _Invalid("Item size has exceeded the maximum allowed size")
        return tuple(self._key_value(name, item[name]) for name in self.key_names())


def _sort_value(av: dict[str, Any] | None) -> tuple[int, Any]:
    if av is None:
        return (0, "")
    kind, value = _comparable(av)
    return (1, value)


@dataclass
class _Write:
    """One parsed write of an item (or a ConditionCheck): what it needs and what it makes."""

    kind: str  # Put, Update, Delete or ConditionCheck
    params: dict[str, Any]
    table: _Table
    key: tuple[Any, ...]
    condition: Condition
    update: _Update | None
    put: dict[str, Any] | None

    def old(self) -> dict[str, Any] | None:
        return self.table.items.get(self.key)

    def result(self, old: dict[str, Any] | None) -> dict[str, Any] | None:
        """The item after this write (the old one for a ConditionCheck, None after a Delete)."""
        if self.kind == "Put":
            return self.put
        if self.kind == "Update":
            assert self.update is not None
            base = copy.deepcopy(old) if old else {k: _canonical(v) for k, v in self.params["Key"].items()}
            new = _apply_update(base, self.update)
            self.table.check_item(new)
            return new
        return old if self.kind == "ConditionCheck" else None

    def apply(self, new: dict[str, Any] | None) -> None:
        if self.kind == "ConditionCheck":
            return
        if new is None:
            self.table.items.pop(self.key, None)
        else:
            self.table.items[self.key] = new


class FakeDynamoDB(FakeClient):
    """The low-level client: methods named and called like boto3's, wire-format values."""

    SERVICE = SERVICE

    def __init__(self, region: str = "us-east-1", account: str = "123456789012"):
        super().__init__(region)
        self.account = account
        self._tables: dict[str, _Table] = {}
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.RLock()

    # ---- plumbing --------------------------------------------------------------------------------
    def _call(self, operation: str, params: dict[str, Any], handler: Any) -> dict[str, Any]:
        self._validate(operation, params)
        with self._lock:
            try:
                return _ok(handler(**params))
            except _Invalid as err:
                raise _error(operation, "ValidationException", str(err)) from None

    def _table(self, name: str) -> _Table:
        if name not in self._tables:
            raise _ResourceNotFound("Requested resource not found")
        return self._tables[name]

    def __getattr__(self, name: str) -> Any:
        handler = getattr(type(self), f"_op_{name}", None)
        if handler is None:
            raise AttributeError(f"the fake DynamoDB client has no {name}")
        operation = "".join(part.capitalize() for part in name.split("_"))

        def call(**params: Any) -> dict[str, Any]:
            try:
                return self._call(operation, params, lambda **p: handler(self, **p))
            except _ResourceNotFound as err:
                raise _error(operation, "ResourceNotFoundException", str(err)) from None
            except _Failed as err:
                raise _error(operation, err.code, err.message, **err.extra) from None

        return call

    def _names(self, params: dict[str, Any]) -> _Names:
        values = {k: _canonical(v) for k, v in params.get("ExpressionAttributeValues", {}).items()}
        return _Names(dict(params.get("ExpressionAttributeNames", {})), values)

    # ---- tables ----------------------------------------------------------------------------------
    def _op_create_table(self, **p: Any) -> dict[str, Any]:
        name = p["TableName"]
        if name in self._tables:
            raise _Failed("ResourceInUseException", f"Table already exists: {name}")
        attributes = {a["AttributeName"]: a["AttributeType"] for a in p.get("AttributeDefinitions", [])}
        indexes = {}
        for gsi in p.get("GlobalSecondaryIndexes", []):
            keys = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
            indexes[gsi["IndexName"]] = _Index(
                gsi["IndexName"], keys["HASH"], keys.get("RANGE"), gsi.get("Projection", {"ProjectionType": "ALL"})
            )
        arn = f"arn:aws:dynamodb:{self.region}:{self.account}:table/{name}"
        now = datetime.now(UTC)
        description: dict[str, Any] = {
            "TableName": name,
            "TableArn": arn,
            "TableId": str(uuid.uuid4()),
            "TableStatus": "ACTIVE",
            "CreationDateTime": now,
            "KeySchema": p["KeySchema"],
            "AttributeDefinitions": p.get("AttributeDefinitions", []),
            "BillingModeSummary": {"BillingMode": p.get("BillingMode", "PROVISIONED")},
            "ProvisionedThroughput": {"ReadCapacityUnits": 0, "WriteCapacityUnits": 0, "NumberOfDecreasesToday": 0},
        }
        if p.get("GlobalSecondaryIndexes"):
            description["GlobalSecondaryIndexes"] = [
                {**gsi, "IndexStatus": "ACTIVE", "IndexArn": f"{arn}/index/{gsi['IndexName']}"}
                for gsi in p["GlobalSecondaryIndexes"]
            ]
        if p.get("SSESpecification", {}).get("Enabled"):
            description["SSEDescription"] = {"Status": "ENABLED", "SSEType": "KMS"}
        if p.get("StreamSpecification", {}).get("StreamEnabled"):
            description["StreamSpecification"] = p["StreamSpecification"]
            description["LatestStreamArn"] = f"{arn}/stream/{now.isoformat()}"
        self._tables[name] = _Table(name, arn, p["KeySchema"], attributes, indexes, description)
        return {"TableDescription": copy.deepcopy(description)}

    def _op_describe_table(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        description = copy.deepcopy(table.description)
        description["ItemCount"] = len(table.items)
        description["TableSizeBytes"] = sum(_item_size(i) for i in table.items.values())
        return {"Table": description}

    def _op_list_tables(self, **p: Any) -> dict[str, Any]:
        return {"TableNames": sorted(self._tables)}

    def _op_delete_table(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        del self._tables[table.name]
        return {"TableDescription": copy.deepcopy(table.description)}

    def _op_update_time_to_live(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        spec = p["TimeToLiveSpecification"]
        table.ttl = {"TimeToLiveStatus": "ENABLED" if spec["Enabled"] else "DISABLED", "AttributeName": spec["AttributeName"]}
        return {"TimeToLiveSpecification": dict(spec)}

    def _op_describe_time_to_live(self, **p: Any) -> dict[str, Any]:
        return {"TimeToLiveDescription": dict(self._table(p["TableName"]).ttl)}

    def _op_update_continuous_backups(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        table.pitr = bool(p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"])
        return {"ContinuousBackupsDescription": self._backups(table)}

    def _op_describe_continuous_backups(self, **p: Any) -> dict[str, Any]:
        return {"ContinuousBackupsDescription": self._backups(self._table(p["TableName"]))}

    @staticmethod
    def _backups(table: _Table) -> dict[str, Any]:
        status = "ENABLED" if table.pitr else "DISABLED"
        return {"ContinuousBackupsStatus": "ENABLED", "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": status}}

    # ---- single items ----------------------------------------------------------------------------
    def _op_get_item(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        names = self._names(p)
        paths = _projection(p.get("ProjectionExpression"), names)
        names.check_all_used()
        item = table.items.get(table.key_of(p["Key"]))
        return {"Item": _project(item, paths)} if item is not None else {}

    def _plan(self, kind: str, p: dict[str, Any]) -> _Write:
        """Parses and validates one Put/Update/Delete/ConditionCheck (nothing is written yet)."""
        table = self._table(p["TableName"])
        names = self._names(p)
        condition = _condition(p.get("ConditionExpression"), names)
        update = _parse_update(p["UpdateExpression"], names) if kind == "Update" else None
        names.check_all_used()
        put = {k: _canonical(v) for k, v in p["Item"].items()} if kind == "Put" else None
        key = table.check_item(put) if put is not None else table.key_of(p["Key"])
        if update is not None:
            for path in update.paths():
                if path[0] in table.key_names():
                    raise _Invalid(
                        f"One or more parameter values were invalid: Cannot update attribute {path[0]}. "
                        "This attribute is part of the key"
                    )
        return _Write(kind, p, table, key, condition, update, put)

    def _write(self, kind: str, p: dict[str, Any]) -> dict[str, Any]:
        """Put, Update or Delete of one item, with its condition and return values."""
        write = self._plan(kind, p)
        old = write.old()
        if not write.condition(old or {}):
            extra = {"Item": copy.deepcopy(old)} if old and p.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else {}
            raise _Failed("ConditionalCheckFailedException", "The conditional request failed", **extra)
        new = write.result(old)
        write.apply(new)
        return self._returned(p.get("ReturnValues", "NONE"), old, new, write.update)

    @staticmethod
    def _returned(mode: str, old: dict[str, Any] | None, new: dict[str, Any] | None, update: _Update | None) -> dict[str, Any]:
        if mode == "ALL_OLD" and old:
            return {"Attributes": copy.deepcopy(old)}
        if mode == "ALL_NEW" and new:
            return {"Attributes": copy.deepcopy(new)}
        if mode in ("UPDATED_NEW", "UPDATED_OLD") and update is not None:
            source = new if mode == "UPDATED_NEW" else old
            touched = {p[0] for p in update.paths()}
            out = {k: copy.deepcopy(v) for k, v in (source or {}).items() if k in touched}
            return {"Attributes": out} if out else {}
        return {}

    def _op_put_item(self, **p: Any) -> dict[str, Any]:
        if p.get("ReturnValues", "NONE") not in ("NONE", "ALL_OLD"):
            raise _Invalid("ReturnValues can only be ALL_OLD or NONE")
        return self._write("Put", p)

    def _op_update_item(self, **p: Any) -> dict[str, Any]:
        if "UpdateExpression" not in p:
            raise _Invalid("This fake needs an UpdateExpression (AttributeUpdates is legacy)")
        return self._write("Update", p)

    def _op_delete_item(self, **p: Any) -> dict[str, Any]:
        if p.get("ReturnValues", "NONE") not in ("NONE", "ALL_OLD"):
            raise _Invalid("ReturnValues can only be ALL_OLD or NONE")
        return self._write("Delete", p)

    # ---- several items ---------------------------------------------------------------------------
    def _op_batch_get_item(self, **p: Any) -> dict[str, Any]:
        requests = p["RequestItems"]
        if sum(len(r["Keys"]) for r in requests.values()) > 100:
            raise _Invalid("Too many items requested for the BatchGetItem call")
        responses: dict[str, list[dict[str, Any]]] = {}
        for name, request in requests.items():
            table = self._table(name)
            names = self._names(request)
            paths = _projection(request.get("ProjectionExpression"), names)
            keys = [table.key_of(k) for k in request["Keys"]]
            if len(set(keys)) != len(keys):
                raise _Invalid("Provided list of item keys contains duplicates")
            responses[name] = [_project(table.items[k], paths) for k in keys if k in table.items]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def _op_batch_write_item(self, **p: Any) -> dict[str, Any]:
        requests = p["RequestItems"]
        if sum(len(r) for r in requests.values()) > 25:
            raise _Invalid("Too many items requested for the BatchWriteItem call")
        planned: list[tuple[_Table, tuple[Any, ...], dict[str, Any] | None]] = []
        for name, writes in requests.items():
            table = self._table(name)
            for write in writes:
                if "PutRequest" in write:
                    item = {k: _canonical(v) for k, v in write["PutRequest"]["Item"].items()}
                    planned.append((table, table.check_item(item), item))
                else:
                    planned.append((table, table.key_of(write["DeleteRequest"]["Key"]), None))
        targets = [(t.name, k) for t, k, _ in planned]
        if len(set(targets)) != len(targets):
            raise _Invalid("Provided list of item keys contains duplicates")
        for table, key, item in planned:
            if item is None:
                table.items.pop(key, None)
            else:
                table.items[key] = item
        return {"UnprocessedItems": {}}

    def _op_transact_write_items(self, **p: Any) -> dict[str, Any]:
        operations = p["TransactItems"]
        if len(operations) > 100:
            raise _Invalid("Member must have length less than or equal to 100")
        token = p.get("ClientRequestToken")
        fingerprint = hashlib.sha256(json.dumps(operations, sort_keys=True, default=repr).encode()).hexdigest()
        now = time.monotonic()
        self._tokens = {t: v for t, v in self._tokens.items() if now - v[1] < TOKEN_TTL_S}
        if token and token in self._tokens:
            if self._tokens[token][0] != fingerprint:
                raise _Failed(
                    "IdempotentParameterMismatchException",
                    "The request uses the same client token as a previous, but non-identical request.",
                )
            return {}  # DynamoDB answers a repeated token with success and writes nothing again
        plans = [self._plan(*next(iter(operation.items()))) for operation in operations]
        targets = [(plan.table.name, plan.key) for plan in plans]
        if len(set(targets)) != len(targets):
            raise _Invalid("Transaction request cannot include multiple operations on one item")
        reasons: list[dict[str, Any]] = []
        for plan in plans:
            old = plan.old()
            reason: dict[str, Any] = {"Code": "None"}
            if not plan.condition(old or {}):
                reason = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                if old and plan.params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                    reason["Item"] = copy.deepcopy(old)
            reasons.append(reason)
        if any(r["Code"] != "None" for r in reasons):
            codes = ", ".join(r["Code"] for r in reasons)
            raise _Failed(
                "TransactionCanceledException",
                f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                CancellationReasons=reasons,
            )
        results = [(plan, plan.result(plan.old())) for plan in plans]  # all computed before any is written
        for plan, new in results:
            plan.apply(new)
        if token:
            self._tokens[token] = (fingerprint, now)
        return {}

    # ---- queries ---------------------------------------------------------------------------------
    def _op_query(self, **p: Any) -> dict[str, Any]:
        table = self._table(p["TableName"])
        index = table.indexes.get(p["IndexName"]) if p.get("IndexName") else None
        if p.get("IndexName") and index is None:
            raise _Invalid(f"The table does not have the specified index: {p['IndexName']}")
        if index is not None and p.get("ConsistentRead"):
            raise _Invalid("Consistent reads are not supported on global secondary indexes")
        hash_key = index.hash_key if index else table.hash_key
        range_key = index.range_key if index else table.range_key
        names = self._names(p)
        key_condition = _condition(p["KeyConditionExpression"], names)
        key_hash = self._key_hash_value(p["KeyConditionExpression"], names, hash_key)
        filter_condition = _condition(p.get("FilterExpression"), names)
        paths = _projection(p.get("ProjectionExpression"), names)
        names.check_all_used()
        candidates = [
            item
            for item in table.items.values()
            if _equal(item.get(hash_key), key_hash) and (range_key is None or range_key in item) and key_condition(item)
        ]

        def order(item: dict[str, Any]) -> tuple[Any, ...]:
            return (
                _sort_value(item.get(range_key)) if range_key else (0, ""),
                *[_sort_value(item[k]) for k in table.key_names()],
            )

        candidates.sort(key=order, reverse=not p.get("ScanIndexForward", True))
        start = p.get("ExclusiveStartKey")
        if start:
            start_order = order({k: _canonical(v) for k, v in start.items()})
            forward = p.get("ScanIndexForward", True)
            candidates = [i for i in candidates if (order(i) > start_order if forward else order(i) < start_order)]
        limit = p.get("Limit")
        page = candidates[:limit] if limit else candidates
        out: dict[str, Any] = {}
        if limit and len(candidates) > limit:
            last = page[-1]
            key_attrs = table.key_names() + ([hash_key] + ([range_key] if range_key else []) if index else [])
            out["LastEvaluatedKey"] = {k: copy.deepcopy(last[k]) for k in dict.fromkeys(key_attrs)}
        matched = [item for item in page if filter_condition(item)]
        if index and index.projection.get("ProjectionType") == "KEYS_ONLY" and paths is None:
            keep = set(table.key_names()) | {hash_key, range_key}
            matched = [{k: v for k, v in item.items() if k in keep} for item in matched]
        items = [_project(item, paths) for item in matched]
        if p.get("Select") == "COUNT":
            return {**out, "Count": len(items), "ScannedCount": len(page)}
        return {**out, "Items": items, "Count": len(items), "ScannedCount": len(page)}

    @staticmethod
    def _key_hash_value(expression: str, names: _Names, hash_key: str) -> dict[str, Any]:
        """The value the key condition pins the partition key to (DynamoDB requires `pk = :v`)."""
        tokens = _tokenize(expression).items
        for i in range(len(tokens) - 2):
            (k1, t1), (_, op), (k3, t3) = tokens[i], tokens[i + 1], tokens[i + 2]
            if op == "=" and k3 == "value" and (names.names.get(t1) if k1 == "name" else t1) == hash_key:
                return names.values[t3]
        raise _Invalid("Query condition missed key schema element: " + hash_key)


class _ResourceNotFound(Exception):
    pass


class _Failed(Exception):
    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra
