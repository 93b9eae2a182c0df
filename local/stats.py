"""The local stack measured from inside: `python -m local.stack --stats` (bench/soak.py uses it).

With `--stats` the HTTP front also answers `GET /@local/stats` (loopback only, no auth, never
routed to a function) with what a long run needs to tell stored data from growth that is not:

- `rss_mb`: the process's resident memory; `cpu_s`: the CPU time it has used (all its threads);
- `data`: what moto's backends hold, per service: DynamoDB items (and by kind: the sort key's first
  part), S3 objects, SQS messages (count and bytes: every object an item is made of, measured
  with `sys.getsizeof`, one item at a time; an S3 object's body by its size), moto's own
  bookkeeping that outlives the data (SQS's receipt handles of deleted messages), and the
  emulator's index over the items (its containers only);
- `calls`: count and total seconds per AWS operation as the handlers' SDK clients see them
  (`dynamodb.Query`, `s3.PutObject`...), per operation as moto serves it (`moto.dynamodb.Query`,
  lock waits included; a Query or Scan named by its index and key condition), per HTTP route of
  the front (`route.POST /api/...`), and the cyclic garbage collector's pauses per generation;
- `tracemalloc`: when the process was started with PYTHONTRACEMALLOC=N, the traced bytes by where
  they were allocated (moto, botocore, the engram layer, the local stack, other), the largest
  lines, and what grew most since the previous read (with N frames each).

Cumulative since start: the caller takes differences between two reads. Nothing here is installed
without `--stats`; the counters are one entry per operation name (a bounded set).
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterable
from typing import Any

STATS_PATH = "/@local/stats"

_lock = threading.Lock()
_calls: dict[str, list[float]] = {}  # name -> [count, seconds]


def record(name: str, seconds: float) -> None:
    with _lock:
        entry = _calls.get(name)
        if entry is None:
            _calls[name] = [1, seconds]
        else:
            entry[0] += 1
            entry[1] += seconds


def calls() -> dict[str, dict[str, float]]:
    with _lock:
        return {name: {"count": int(count), "seconds": seconds} for name, (count, seconds) in _calls.items()}


_gc_started: list[float] = [0.0]


def _gc_timer(phase: str, info: dict[str, Any]) -> None:
    """The cyclic collector's pauses by generation: a full collection walks every object the stored
    data is made of, so its pauses lengthen as the data grows."""
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        record(f"python.gc generation {info.get('generation')}", time.perf_counter() - _gc_started[0])


def install() -> None:
    """Time every SDK call of the process (botocore) and every request moto serves. Idempotent."""
    from botocore.client import BaseClient
    from moto.core.responses import BaseResponse

    if not getattr(BaseClient._make_api_call, "_engram_timed", False):
        sdk_call = BaseClient._make_api_call

        @functools.wraps(sdk_call)
        def timed_call(self: Any, operation_name: str, api_params: Any) -> Any:
            started = time.perf_counter()
            try:
                return sdk_call(self, operation_name, api_params)
            finally:
                record(f"{self.meta.service_model.service_name}.{operation_name}", time.perf_counter() - started)

        timed_call._engram_timed = True  # type: ignore[attr-defined]
        BaseClient._make_api_call = timed_call  # type: ignore[method-assign]

    if _gc_timer not in gc.callbacks:
        gc.callbacks.append(_gc_timer)

    if not getattr(BaseResponse._dispatch, "_engram_timed", False):
        serve = BaseResponse._dispatch

        @functools.wraps(serve)
        def timed_dispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return serve(self, *args, **kwargs)
            finally:
                try:
                    action = self._get_action()
                except Exception:
                    action = "?"
                record(f"moto.{self.service_name}.{action}{_shape(action, self)}", time.perf_counter() - started)

        timed_dispatch._engram_timed = True  # type: ignore[attr-defined]
        BaseResponse._dispatch = timed_dispatch  # type: ignore[method-assign]


def _shape(action: str, handler: Any) -> str:
    """A DynamoDB read's index and key condition (placeholders, not values: a bounded set of names),
    so that a query whose time grows with the table is named."""
    body = getattr(handler, "body", None)
    if action not in ("Query", "Scan") or not isinstance(body, dict):
        return ""
    shape = f" {body.get('IndexName') or 'table'}"
    if body.get("KeyConditionExpression"):
        shape += f": {body['KeyConditionExpression']}"
        # the kind a sort key condition names (`:sk` = "MEM#..." -> MEM#), never an id
        kinds = set()
        for value in (body.get("ExpressionAttributeValues") or {}).values():
            head = str((value or {}).get("S", "")).split("#", 1)
            if len(head) == 2 and head[0].isalpha() and head[0].isupper():
                kinds.add(f"{head[0]}#")
        shape += f" [{', '.join(sorted(kinds))}]" if kinds else ""
    if body.get("FilterExpression"):
        shape += " (filtered)"
    return shape[:120]


# --------------------------------------------------------------------------- sizes
_ATOMS = (str, bytes, bytearray, int, float, bool, type(None), complex)
_SKIP = (type, type(sys), type(len), type(install), threading.Lock().__class__)


def deep_size(roots: Iterable[Any], seen: set[int]) -> int:
    """Bytes of `roots` and of everything they hold (containers, instance dicts and slots), each
    object once across calls sharing `seen`; classes, modules, functions and locks are not data."""
    total = 0
    pending = list(roots)
    while pending:
        obj = pending.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, _ATOMS):
            continue
        if isinstance(obj, dict):
            pending.extend(obj.keys())
            pending.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            pending.extend(obj)
        else:
            pending.extend(o for o in gc.get_referents(obj) if not isinstance(o, _SKIP))
    return total


def _backends(backends: Any) -> list[Any]:
    """Every (account, region) backend of a moto service that exists."""
    found = []
    for account in list(backends.keys()):
        regions = backends[account]
        for region in list(getattr(regions, "keys", list)()):
            found.append(regions[region])
    return found


def _each(objects: Iterable[Any]) -> int:
    """The summed deep size of each object on its own: a walk of one item at a time keeps no set of
    every object's id (a set that size, made and dropped at each read, grew the heap it measures)."""
    return sum(deep_size([obj], set()) for obj in objects)


def _containers(root: Any) -> int:
    """Bytes of the dicts, lists, sets and tuples under `root`, not of what they hold: the emulator's
    index (local/emulator.py `_IndexMap`) files the stored items and their own values, counted
    as data already; what it adds is its containers."""
    total, pending = 0, [root]
    while pending:
        obj = pending.pop()
        if isinstance(obj, dict):
            total += sys.getsizeof(obj)
            pending.extend(v for v in obj.values() if isinstance(v, dict | list | tuple | set))
            pending.extend(k for k in obj if isinstance(k, tuple))
        elif isinstance(obj, list | tuple | set):
            total += sys.getsizeof(obj)
            pending.extend(v for v in obj if isinstance(v, dict | list | tuple | set))
    return total


def _kind(stored: Any) -> str:
    """An item's kind: its sort key's first part (RUN#..., ARCH#...), or for a time-ordered sort key
    the partition's kind (`<tenant>#USAGE` -> USAGE by time)."""
    sort_key = str((stored.range_key if stored.range_key is not None else stored.hash_key).value)
    if sort_key[:1].isalpha():
        return sort_key.split("#", 1)[0]
    parts = [part for part in str(stored.hash_key.value).split("#")[1:] if part.isalpha() and part.isupper()]
    return f"{parts[0] if parts else '?'} by time"


def stored_data() -> dict[str, dict[str, int]]:
    """Count and bytes of what moto's backends store, per kind (see the module docstring)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.sqs.models import sqs_backends

    from .emulator import _LOCK

    out: dict[str, dict[str, int]] = {}
    total = out["dynamodb_items"] = {"count": 0, "bytes": 0}
    now = time.time()
    with _LOCK:  # DynamoDB's dicts change only under the emulator's lock
        for backend in _backends(dynamodb_backends):
            for table in list(backend.tables.values()):
                for partition in list(table.items.values()):
                    for stored in partition.values() if table.range_key_attr is not None else [partition]:
                        size = deep_size([stored], set())
                        # by kind: the sort key's first part (RUN#..., USAGE#...); expired: past its TTL
                        name = f"dynamodb {_kind(stored)}"
                        kind = out.setdefault(name, {"count": 0, "bytes": 0, "expired": 0})
                        for figures in (total, kind):
                            figures["count"] += 1
                            figures["bytes"] += size
                        expires = stored.attrs.get("expiresAt")
                        if expires is not None and expires.type == "N" and float(expires.value) <= now:
                            kind["expired"] += 1
        index = out["emulator index"] = {"count": 0, "bytes": 0}
        for backend in _backends(dynamodb_backends):
            for table in list(backend.tables.values()):
                index_map = table.__dict__.get("_engram_index_map")
                if index_map is not None:
                    index["count"] += len(index_map.filed)
                    index["bytes"] += _containers(vars(index_map))
    objects = [
        key
        for backend in _backends(s3_backends)
        for bucket in list(backend.buckets.values())
        for versions in list(bucket.keys.lists())
        for key in versions[1]
    ]
    body = sum(int(key.size or 0) for key in objects)
    meta = _each({k: v for k, v in vars(key).items() if k not in ("_value_buffer", "lock")} for key in objects)
    out["s3_objects"] = {"count": len(objects), "bytes": body + meta}
    queues = [queue for backend in _backends(sqs_backends) for queue in list(backend.queues.values())]
    messages = [message for queue in queues for message in list(queue._messages)]
    out["sqs_messages"] = {"count": len(messages), "bytes": _each(messages)}
    handles = [handle for queue in queues for handle in list(queue.deleted_messages)]
    out["sqs_deleted_handles"] = {"count": len(handles), "bytes": _each(handles)}
    return out


_GROUPS = (
    ("moto", f"{os.sep}moto{os.sep}"),
    ("botocore", f"{os.sep}botocore{os.sep}"),
    ("engram", f"{os.sep}engram{os.sep}"),
    ("functions", f"{os.sep}functions{os.sep}"),
    ("local", f"{os.sep}local{os.sep}"),
    ("werkzeug", f"{os.sep}werkzeug{os.sep}"),
    ("stdlib", f"{os.sep}lib{os.sep}python3"),
)


_previous: list[tracemalloc.Snapshot] = []  # the last snapshot taken, to report what grew since


def traced_by_origin(top: int = 15) -> dict[str, Any]:
    """Traced bytes grouped by the allocating frame's file (PYTHONTRACEMALLOC=N), the largest lines,
    and the allocations that grew most since the previous call, with their N frames."""
    if not tracemalloc.is_tracing():
        return {}
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    growth = []
    if _previous:
        for diff in snapshot.compare_to(_previous[0], "traceback")[:top]:
            frames = " < ".join(f"{f.filename.rsplit(os.sep, 2)[-1]}:{f.lineno}" for f in reversed(diff.traceback))
            growth.append({"where": frames, "bytes": diff.size_diff, "count": diff.count_diff})
    _previous[:] = [snapshot]
    groups: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        file = stat.traceback[-1].filename  # the allocating frame (a traceback is oldest first)
        group = next((name for name, marker in _GROUPS if marker in file), "other")
        if group == "stdlib" and "site-packages" in file:
            group = "other"
        groups[group] = groups.get(group, 0) + stat.size
    lines = [
        {"where": f"{s.traceback[-1].filename.rsplit(os.sep, 2)[-1]}:{s.traceback[-1].lineno}", "bytes": s.size, "count": s.count}
        for s in snapshot.statistics("lineno")[:top]
    ]
    return {"by_origin": groups, "top_lines": lines, "growth": growth}


def rss_mb(pid: int | None = None) -> float | None:
    """Resident memory of a process (this one by default) in MB, from Linux /proc; None elsewhere."""
    try:
        with open(f"/proc/{pid or os.getpid()}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def snapshot(*, data: bool = True) -> dict[str, Any]:
    """What `GET /@local/stats` answers (`?data=0` leaves out the walk over the stored data)."""
    answer: dict[str, Any] = {"rss_mb": rss_mb(), "cpu_s": time.process_time(), "calls": calls()}
    if data:
        answer["data"] = stored_data()
        answer["tracemalloc"] = traced_by_origin()
    return answer
