"""GET /api/usage: usage rows with totals, and the breakdowns of the usage totals (per day, model,
kind, agent; cache savings); the person's spending limits; the check before a scheduled run."""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id
from engram.kernel.model import page
from engram.usage import totals as t
from engram.usage.limits import SpendGuard
from engram.usage.models import Limits, UserLimits

if TYPE_CHECKING:
    from engram.usage.ports import LimitedAgents, UsageLedger

DEFAULT_DAYS = 30
MAX_DAYS = 366


def list_usage(
    usage: UsageLedger,
    agents: LimitedAgents,
    tenant: str,
    agent_id: str | None,
    session_id: str | None,
    limit: int,
    token: str | None,
    start: str | None = None,
    end: str | None = None,
) -> dict[str, object]:
    if session_id and not agent_id:
        raise BadRequest("sessionId filters need agentId (session ids are per agent)", field="agentId", code="missing_filter")
    if agent_id:
        check_id("agentId", agent_id)
    first, last = _range(start, end)
    rows, nxt = usage.page(tenant, agent_id=agent_id, session_key=session_id, limit=limit, token=token)
    totals = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0}
    totals["cacheSavingsUsd"] = 0.0
    for row in rows:
        data = row.public()
        for k in totals:
            totals[k] += data[k]
    totals["costUsd"] = round(totals["costUsd"], 8)
    totals["cacheSavingsUsd"] = round(totals["cacheSavingsUsd"], 8)
    out: dict[str, object] = {**page(rows, nxt), "totals": totals}
    if not session_id:  # the totals are kept per person and agent, not per session
        out["breakdown"] = breakdown(usage, agents, tenant, first, last, agent_id=agent_id)
    return out


def _day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"{name} must be a date, YYYY-MM-DD", field=name, code="invalid_date") from None


def _range(start: str | None, end: str | None) -> tuple[date, date]:
    """`from`..`to` (UTC days, both included): by default the last 30 days up to today."""
    last = _day(end, "to") if end else t.today()
    first = _day(start, "from") if start else last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise BadRequest("from must not be after to", field="from", code="invalid_range")
    if (last - first).days + 1 > MAX_DAYS:
        raise BadRequest(f"a usage range is at most {MAX_DAYS} days", field="from", code="invalid_range")
    return first, last


def breakdown(
    usage: UsageLedger, agents: LimitedAgents, tenant: str, first: date, last: date, *, agent_id: str | None = None
) -> dict[str, object]:
    """The totals of `first`..`last` from the day items (one Query): every day (zeros included),
    per model, per kind and (the person's) per agent, and what the spending limits leave."""
    items = usage.totals(tenant, first, last, agent_id=agent_id)
    by_day = {str(item["SK"]).rsplit("#", 1)[-1]: item for item in items}
    days = [{"date": day, **t.whole(by_day.get(day, {}))} for day in t.days(first, last)]
    groups = t.split(items)
    out: dict[str, object] = {
        "firstDay": first.isoformat(),
        "lastDay": last.isoformat(),
        "agentId": agent_id,
        "totals": t.summed(t.whole(item) for item in items),
        "days": days,
        "models": t.listed(groups["model"], "model"),
        "kinds": t.listed(groups["kind"], "kind"),
    }
    if agent_id is None:
        out["agents"] = t.listed(groups["agentId"], "agentId")
    out["spending"] = spending(usage, agents, tenant, agent_id)
    return out


def spending(usage: UsageLedger, agents: LimitedAgents, tenant: str, agent_id: str | None) -> dict[str, object]:
    """What is spent today and this month (UTC) against the limits that apply: the agent's when
    `agent_id` is given, else the person's. A deleted agent's usage stays (billing history), so
    an agent id the caller has not (or no longer) is no error: no limits, its totals as kept (an
    id of another person's agent finds nothing, every key being the caller's)."""
    day = t.today()
    if agent_id is not None:
        agent = agents.get(tenant, agent_id)
        spend = usage.spend(tenant, agent_id, day)
        limits, spent_day, spent_month = agent.limits if agent else None, spend.agent_day, spend.agent_month
    else:
        limits, spent_day, spent_month = usage.limits(tenant), *_person_spent(usage, tenant, day)
    return {
        "limits": limits.public() if limits else {},
        "todayUsd": spent_day,
        "thisMonthUsd": spent_month,
        "dayResetsAt": t.next_day(day),
        "monthResetsAt": t.next_month(day),
    }


def _person_spent(usage: UsageLedger, tenant: str, day: date) -> tuple[float, float]:
    month = usage.totals(tenant, day, day, months=True)
    today = usage.totals(tenant, day, day)
    return float(t.summed(t.whole(i) for i in today)["costUsd"]), float(t.summed(t.whole(i) for i in month)["costUsd"])


# --- the person's limits ----------------------------------------------------------------------------
def my_limits(usage: UsageLedger, tenant: str) -> dict[str, object]:
    limits = usage.limits(tenant)
    return limits.public() if limits else {}


def set_my_limits(usage: UsageLedger, tenant: str, limits: UserLimits | None) -> dict[str, object]:
    """PATCH /api/me `limits`: replaces the person's limits (null or {} removes them)."""
    stored = Limits.model_validate(limits.model_dump()) if limits is not None else None
    usage.set_limits(tenant, stored if stored is not None and stored.public() else None)
    return stored.public() if stored else {}


def refuse_over_limit(usage: UsageLedger, tenant: str, agent_id: str, limits: Limits | None) -> None:
    """LimitExceeded when the agent (or the person) has reached a cost limit: a scheduled or
    manual run is then not started (one read)."""
    guard = SpendGuard(limits, usage.spend(tenant, agent_id, t.today()))
    if guard.active:
        guard.before_call(0.0)
