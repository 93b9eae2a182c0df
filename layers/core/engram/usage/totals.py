"""Usage totals (TL10, OB4): what a write of usage rows adds to the person's and the agent's day
and month, and how a totals item reads back as a breakdown.

A totals item is flat, so a write adds to it with DynamoDB's ADD (no read, no map that must exist
first): `costUsd`, `inputTokens`, ... for the whole; `m|<model>|<field>` per model,
`k|<kind>|<field>` per kind, and on the person's items `a|<agentId>|<field>` per agent. Model
names and ids hold no `|`. Pure: the repositories turn these into their writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta

from engram.aws import keys
from engram.kernel.observability import MetricUnit, metric_by
from engram.usage.models import Usage, UsageRow

FIELDS = ("costUsd", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "cacheSavingsUsd")
COSTS = ("costUsd", "cacheSavingsUsd")
SEP = "|"
_DIMENSIONS = {"m": "model", "k": "kind", "a": "agentId"}


def _row_values(row: UsageRow) -> dict[str, float | int]:
    data = row.model_dump(by_alias=True)
    return {f: data[f] for f in FIELDS if data[f]}


def _add(into: dict[str, float | int], name: str, value: float | int) -> None:
    total = into.get(name, 0) + value
    into[name] = round(total, 8) if isinstance(total, float) else total


def increments(rows: Sequence[UsageRow], *, kind: str, tool_calls: int = 0, per_agent: bool) -> dict[str, float | int]:
    """What `rows` (one write's, one kind) add to a totals item; `per_agent`: the person's items,
    which also count per agent. Zero values are left out (an absent attribute reads as 0)."""
    delta: dict[str, float | int] = {}
    for row in rows:
        for name, value in _row_values(row).items():
            _add(delta, name, value)
            _add(delta, f"m{SEP}{row.model}{SEP}{name}", value)
            _add(delta, f"k{SEP}{kind}{SEP}{name}", value)
            if per_agent:
                _add(delta, f"a{SEP}{row.agent_id}{SEP}{name}", value)
    if tool_calls and rows:
        _add(delta, "toolCalls", tool_calls)
        _add(delta, f"k{SEP}{kind}{SEP}toolCalls", tool_calls)
        if per_agent:
            _add(delta, f"a{SEP}{rows[0].agent_id}{SEP}toolCalls", tool_calls)
    return delta


def add_expression(delta: Mapping[str, float | int]) -> tuple[str, dict[str, str], dict[str, object]]:
    """`ADD #n0 :v0, ...` with its names and values."""
    names = {f"#n{i}": name for i, name in enumerate(delta)}
    values: dict[str, object] = {f":v{i}": value for i, value in enumerate(delta.values())}
    return "ADD " + ", ".join(f"#n{i} :v{i}" for i in range(len(delta))), names, values


def updates(
    tenant: str, rows: Sequence[UsageRow], *, kind: str, tool_calls: int = 0
) -> list[tuple[str, str, dict[str, float | int]]]:
    """(PK, SK, delta) of every totals item `rows` add to: per UTC day of the rows' times, the
    person's and the agent's day and month."""
    by_day: dict[tuple[str, str], list[UsageRow]] = {}
    for row in rows:
        by_day.setdefault((row.created_at[:10], row.agent_id), []).append(row)
    pk = keys.usage_totals_pk(tenant)
    out: list[tuple[str, str, dict[str, float | int]]] = []
    for (day, agent_id), group in sorted(by_day.items()):
        calls, tool_calls = tool_calls, 0  # the turn's tool calls count once
        mine = increments(group, kind=kind, tool_calls=calls, per_agent=False)
        person = increments(group, kind=kind, tool_calls=calls, per_agent=True)
        if not mine:
            continue
        for period in (day, day[:7]):
            out.append((pk, keys.usage_total_sk(period), person))
            out.append((pk, keys.usage_total_sk(period, agent_id), mine))
    return out


# --- periods ----------------------------------------------------------------------------------------
def today(now: datetime | None = None) -> date:
    return (now or datetime.now(UTC)).astimezone(UTC).date()


def next_day(day: date) -> str:
    """When a daily limit resets: the next UTC midnight."""
    return f"{(day + timedelta(days=1)).isoformat()}T00:00:00Z"


def next_month(day: date) -> str:
    """When a monthly limit resets: the first of the next month, UTC."""
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    return f"{year:04d}-{month:02d}-01T00:00:00Z"


def days(start: date, end: date) -> list[str]:
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


# --- reading ------------------------------------------------------------------------------------------
def _number(value: object) -> float | int:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def whole(item: Mapping[str, object]) -> dict[str, float | int]:
    """The item's totals (every field, zeros included) and its tool calls."""
    return {name: _number(item.get(name, 0)) for name in (*FIELDS, "toolCalls")}


def split(items: Iterable[Mapping[str, object]]) -> dict[str, dict[str, dict[str, float | int]]]:
    """The items' per-model, per-kind and per-agent attributes summed: {"model": {name: {field: n}}, ...}."""
    out: dict[str, dict[str, dict[str, float | int]]] = {dimension: {} for dimension in _DIMENSIONS.values()}
    for item in items:
        for attr, value in item.items():
            parts = attr.split(SEP)
            if len(parts) != 3 or parts[0] not in _DIMENSIONS:
                continue
            group = out[_DIMENSIONS[parts[0]]].setdefault(parts[1], {})
            _add(group, parts[2], _number(value))
    return out


def summed(totals: Iterable[Mapping[str, float | int]]) -> dict[str, float | int]:
    out: dict[str, float | int] = {name: 0 for name in (*FIELDS, "toolCalls")}
    for one in totals:
        for name in out:
            _add(out, name, one.get(name, 0))
    return out


def listed(groups: Mapping[str, Mapping[str, float | int]], key: str) -> list[dict[str, object]]:
    """A breakdown's entries, most expensive first, every field present."""
    fields = [f for f in (*FIELDS, "toolCalls") if f != "toolCalls" or key != "model"]  # a model calls no tool
    ranked = sorted(groups.items(), key=lambda pair: (-pair[1].get("costUsd", 0), pair[0]))
    return [{key: name, **{f: group.get(f, 0) for f in fields}} for name, group in ranked]


# --- metrics --------------------------------------------------------------------------------------------
def emit_metrics(kind: str, agent_id: str, usage: Usage, *, per_agent: bool) -> None:
    """CloudWatch usage metrics with a Kind dimension, always; with Kind and AgentId too when
    USAGE_METRICS_PER_AGENT is on (a custom metric per agent: cardinality costs money)."""
    values = (
        ("UsageCostUsd", MetricUnit.NoUnit, usage.cost_usd),
        ("UsageInputTokens", MetricUnit.Count, usage.input_tokens),
        ("UsageOutputTokens", MetricUnit.Count, usage.output_tokens),
        ("UsageCacheReadTokens", MetricUnit.Count, usage.cache_read_tokens),
        ("UsageCacheSavingsUsd", MetricUnit.NoUnit, usage.cache_savings_usd),
    )
    for name, unit, value in values:
        metric_by(name, unit, value, Kind=kind)
        if per_agent:
            metric_by(name, unit, value, Kind=kind, AgentId=agent_id)
