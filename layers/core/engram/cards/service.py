"""Card types (result schemas held as data, AM7), card validation, and an agent's past decisions (AM5).

A card type is a dict of fields in a small schema language (string, number, integer, boolean,
enum; required, enum values, min/max, maxLength). Built-ins are code-free data below and the same
for every user; custom ones are rows in the caller's own partition. The tool `submit_result`
gets its input schema from the card type, and every card is validated here before it becomes a
run's result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.cards.models import CardedRun, CardType, CardTypeBody, Decision
from engram.kernel.errors import BadRequest, Conflict, NotFound
from engram.kernel.ids import check_id
from engram.kernel.model import now_iso, page, page_ranked
from engram.kernel.secrets import redact

if TYPE_CHECKING:
    from engram.cards.ports import AgentLookup, CardedRuns, CardTypes
    from engram.kernel.settings import Settings

_EPOCH = "2025-01-01T00:00:00.000Z"
_EXACT_INT = 2**53  # integral floats up to this are shown as ints; int(1e50) would be 51 digits of noise

BUILT_IN_CARD_TYPES: dict[str, dict[str, Any]] = {
    "decision": {
        "description": "A general decision: one short uppercase word, why, and how sure.",
        "fields": {
            "decision": {
                "type": "string",
                "required": True,
                "maxLength": 30,
                "description": "The decision as one short uppercase word, e.g. GO, WAIT, STOP, BUY.",
            },
            "reason": {"type": "string", "required": True, "maxLength": 300, "description": "Why, in one or two sentences."},
            "confidence": {"type": "integer", "required": True, "min": 0, "max": 100, "description": "How sure, 0-100."},
        },
        "reExaminable": True,
        "reExamineActions": [],
        "summaryFields": ["reason"],
    },
    "trade-decision": {
        "description": "A trade call on one asset: direction or WAIT, levels, and what would change the view.",
        "fields": {
            "asset": {"type": "string", "required": True, "maxLength": 30, "description": "The instrument, e.g. BTC."},
            "decision": {
                "type": "enum",
                "required": True,
                "enum": ["WAIT", "LONG", "SHORT"],
                "description": "WAIT, LONG or SHORT.",
            },
            "summary": {
                "type": "string",
                "required": True,
                "maxLength": 120,
                "description": "The view in a few words, e.g. range unresolved.",
            },
            "confidence": {"type": "integer", "required": True, "min": 0, "max": 100, "description": "How sure, 0-100."},
            "entry": {"type": "number", "min": 0, "description": "Entry price."},
            "take_profit": {"type": "number", "min": 0, "description": "Take-profit price."},
            "stop_loss": {"type": "number", "min": 0, "description": "Stop-loss price."},
            "watch_for": {"type": "string", "maxLength": 300, "description": "What would change the view."},
        },
        "reExaminable": "until_resolved",
        "reExamineActions": ["HOLD", "CLOSE", "SCALE"],
        "summaryFields": ["summary"],
    },
}


_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")
REEXAMINATION = "re-examination"


def reexamination_card_type(parent_type: CardType) -> CardType:
    """The card every re-examination ends with (AM6); suggested_action comes from the parent's card
    type's reExamineActions, else any short uppercase word. Built here, so any card type that opts
    in with reExaminable is re-examinable without code."""
    actions = list(parent_type.re_examine_actions)
    action: dict[str, Any] = (
        {"type": "enum", "required": True, "enum": actions}
        if actions
        else {
            "type": "string",
            "required": True,
            "maxLength": 30,
            "pattern": r"[A-Z][A-Z0-9_]{0,29}",
            "patternHint": "one short UPPERCASE word, e.g. HOLD",
        }
    )
    action["description"] = "Advisory: what the user might do about the original decision."
    fields = {
        "conviction_score": {
            "type": "integer",
            "required": True,
            "min": 0,
            "max": 100,
            "description": "0 = the original conclusion is fully invalidated, 100 = fully confirmed.",
        },
        "notes": {
            "type": "string",
            "required": True,
            "maxLength": 300,
            "oneSentence": True,
            "description": "One sentence on what changed since the original decision.",
        },
        "suggested_action": action,
    }
    return CardType(
        id=REEXAMINATION,
        name=REEXAMINATION,
        created_at=_EPOCH,
        updated_at=_EPOCH,
        built_in=True,
        description=f"Re-examination of a {parent_type.name} card.",
        fields=fields,
        summary_fields=["notes"],
    )


def _built_in(name: str) -> CardType:
    spec = BUILT_IN_CARD_TYPES[name]
    return CardType.model_validate({"id": name, "name": name, "createdAt": _EPOCH, "updatedAt": _EPOCH, "builtIn": True, **spec})


# --- the card type API ------------------------------------------------------------------------
def check_definition(body: CardTypeBody) -> dict[str, dict[str, Any]]:
    """Rules between fields that a field's own model cannot see; returns the fields as stored."""
    out: dict[str, dict[str, Any]] = {}
    for name, spec in body.fields.items():
        where = f"fields.{name}"
        if spec.type == "enum" and not spec.enum:
            raise BadRequest(f"{where}.enum: an enum field needs its values", field=f"{where}.enum")
        if spec.type != "enum" and spec.enum is not None:
            raise BadRequest(f"{where}.enum: only enum fields have values", field=f"{where}.enum")
        if spec.enum is not None and len(set(spec.enum)) != len(spec.enum):
            raise BadRequest(f"{where}.enum: values repeat", field=f"{where}.enum")
        for bound in ("min", "max"):
            value = getattr(spec, bound)
            if value is not None and (spec.type not in ("number", "integer") or not math.isfinite(value)):
                raise BadRequest(f"{where}.{bound}: only a finite bound of a number or integer field", field=f"{where}.{bound}")
        if spec.min is not None and spec.max is not None and spec.min > spec.max:
            raise BadRequest(f"{where}.min is above max", field=f"{where}.min")
        if spec.max_length is not None and spec.type != "string":
            raise BadRequest(f"{where}.maxLength: only string fields have a maxLength", field=f"{where}.maxLength")
        stored = spec.model_dump(by_alias=True, exclude_none=True)
        for bound in ("min", "max"):
            if bound in stored and float(stored[bound]).is_integer() and abs(stored[bound]) <= _EXACT_INT:
                stored[bound] = int(stored[bound])  # 10, not 10.0, in the schema the model sees
        out[name] = stored
    for i, name in enumerate(body.summary_fields):
        if name not in body.fields:
            raise BadRequest(f"summaryFields.{i}: {name!r} is not one of the fields", field=f"summaryFields.{i}")
    if body.re_examine_actions and len(set(body.re_examine_actions)) != len(body.re_examine_actions):
        raise BadRequest("reExamineActions: values repeat", field="reExamineActions")
    return out


def put_card_type(card_types: CardTypes, settings: Settings, tenant: str, name: str, body: CardTypeBody) -> tuple[CardType, bool]:
    check_id("name", name)
    if name in BUILT_IN_CARD_TYPES:
        raise Conflict(
            f"{name} is a built-in card type and cannot be changed; use another name", field="name", code="built_in_card_type"
        )
    fields = check_definition(body)
    existing = card_types.get(tenant, name)
    now = now_iso()
    card_type = CardType(
        id=name,
        name=name,
        created_at=existing.created_at if existing else now,
        updated_at=now,
        description=body.description,
        fields=fields,
        re_examinable=body.re_examinable,
        re_examine_actions=body.re_examine_actions,
        summary_fields=body.summary_fields,
    )
    if existing is None:
        card_types.create(tenant, card_type, limit=settings.max_card_types)
    else:
        card_types.put(tenant, card_type)
    return card_type, existing is None


def find_card_type(card_types: CardTypes, tenant: str, name: str) -> CardType | None:
    if not name:
        return None
    if name in BUILT_IN_CARD_TYPES:
        return _built_in(name)
    return card_types.get(tenant, check_id("cardType", name))


def get_card_type(card_types: CardTypes, tenant: str, name: str) -> CardType:
    check_id("name", name)
    found = find_card_type(card_types, tenant, name)
    if found is None:
        raise NotFound("card type not found", field="name")
    return found


def list_card_types(card_types: CardTypes, tenant: str, limit: int, token: str | None) -> dict[str, object]:
    """Built-ins first, then the caller's own types by name; `limit` items a page, built-ins
    counted. The caller's types are read whole (at most MAX_CARD_TYPES rows) and paged by rank."""
    built_in = {f"0#{i:04d}": _built_in(n) for i, n in enumerate(BUILT_IN_CARD_TYPES)}
    custom = {f"1#{c.name}": c for c in card_types.all(tenant)}
    ranked = {**built_in, **custom}
    rank = {id(c): r for r, c in ranked.items()}
    return page_ranked(list(ranked.values()), lambda c: rank[id(c)], list_id="card-types", limit=limit, token=token)


def require_card_type(card_types: CardTypes, tenant: str, name: str | None) -> None:
    """Agent create/PATCH: a named card type must exist for the caller."""
    if name and find_card_type(card_types, tenant, name) is None:
        raise NotFound(f"card type {name!r} not found", field="cardType", code="card_type_not_found")


# --- cards ------------------------------------------------------------------------------------
def input_schema(card_type: CardType) -> dict[str, object]:
    """The JSON schema of submit_result's input for this card type."""
    props: dict[str, Any] = {}
    for name, spec in card_type.fields.items():
        kind = spec["type"]
        prop: dict[str, Any] = {"type": "string"} if kind == "enum" else {"type": kind}
        if kind == "enum":
            prop["enum"] = list(spec["enum"])
        if "min" in spec:
            prop["minimum"] = spec["min"]
        if "max" in spec:
            prop["maximum"] = spec["max"]
        if "maxLength" in spec:
            prop["maxLength"] = spec["maxLength"]
        if "pattern" in spec:
            prop["pattern"] = spec["pattern"]
        if spec.get("description"):
            prop["description"] = spec["description"]
        props[name] = prop
    return {
        "type": "object",
        "properties": props,
        "required": [n for n, s in card_type.fields.items() if s.get("required")],
        "additionalProperties": False,
    }


def card_problems(card_type: CardType, card: object) -> list[str]:  # noqa: C901 - one branch per field rule, every problem reported at once
    """Everything wrong with a card, so the model can fix it in one go (empty: valid)."""
    if not isinstance(card, dict):
        return ["the card must be an object"]
    problems = [f"{k}: not a field of {card_type.name}" for k in card if k not in card_type.fields]
    for name, spec in card_type.fields.items():
        if name not in card or card[name] is None:
            if spec.get("required"):
                problems.append(f"{name}: required")
            continue
        value, kind = card[name], spec["type"]
        if kind in ("string", "enum"):
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{name}: must be a non-empty string")
            elif kind == "enum" and value not in spec["enum"]:
                problems.append(f"{name}: must be one of {', '.join(spec['enum'])}")
            elif "maxLength" in spec and len(value) > spec["maxLength"]:
                problems.append(f"{name}: at most {spec['maxLength']} characters (got {len(value)})")
            elif "pattern" in spec and not re.fullmatch(spec["pattern"], value.strip()):
                problems.append(f"{name}: {spec.get('patternHint') or 'must match ' + spec['pattern']}")
            elif spec.get("oneSentence") and (("\n" in value.strip()) or _SENTENCE_BREAK.search(value.strip())):
                problems.append(f"{name}: one sentence only")
        elif kind == "boolean":
            if not isinstance(value, bool):
                problems.append(f"{name}: must be true or false")
        else:
            whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"{name}: must be a number")
            elif kind == "integer" and not whole:
                problems.append(f"{name}: must be a whole number")
            elif "min" in spec and value < spec["min"]:
                problems.append(f"{name}: at least {spec['min']:g}")
            elif "max" in spec and value > spec["max"]:
                problems.append(f"{name}: at most {spec['max']:g}")
    return problems


def clean_card(card_type: CardType, card: dict[str, Any]) -> dict[str, object]:
    """A valid card as stored: fields in the type's order, integers as ints, strings trimmed."""
    out: dict[str, Any] = {}
    for name, spec in card_type.fields.items():
        if card.get(name) is None:
            continue
        value = card[name]
        if spec["type"] == "integer":
            value = int(value)
        elif isinstance(value, str):
            value = redact(value.strip())  # the card is shown in later prompts (decisions): no secret in it
        out[name] = value
    return out


# --- decisions (reviewDecisions, GET /api/agents/{agentId}/decisions) -------------------------
def _age(created_at: str, now: datetime) -> str:
    try:
        then = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def _action_of(card: Mapping[str, object], card_type: CardType | None) -> str:
    for key in ("decision", "action", "suggested_action"):
        if isinstance(value := card.get(key), str):
            return value
    if card_type is not None:
        for name, spec in card_type.fields.items():
            if spec["type"] == "enum" and isinstance(value := card.get(name), str):
                return value
    return "-"


def _summary_of(card: Mapping[str, object], card_type: CardType | None) -> str:
    names = (
        list(card_type.summary_fields)
        if card_type and card_type.summary_fields
        else [k for k, v in card.items() if isinstance(v, str) and k not in ("decision", "action")][:1]
    )
    text = ", ".join(str(card[n]) for n in names if card.get(n) not in (None, ""))
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= 80 else text[:79].rstrip() + "…"


def decision_of(run: CardedRun, card_type: CardType | None, now: datetime) -> Decision:
    card = run.result["card"]
    action, summary = _action_of(card, card_type), _summary_of(card, card_type)
    entry = " · ".join(p for p in (_age(run.created_at, now), action, summary) if p)
    return Decision(
        run_id=run.id,
        created_at=run.created_at,
        card_type=run.result.get("cardType"),
        action=action,
        summary=summary,
        entry=entry,
        card=card,
    )


def recent_decisions(card_types: CardTypes, runs: CardedRuns, tenant: str, agent_id: str, limit: int = 5) -> list[Decision]:
    """The agent's last `limit` result cards, newest first, from one bounded Query of its runs."""
    return _decisions(card_types, tenant, runs.recent_with_cards(tenant, agent_id, limit=limit))


def _decisions(card_types: CardTypes, tenant: str, runs: Sequence[CardedRun]) -> list[Decision]:
    now = datetime.now(UTC)
    types: dict[str, CardType | None] = {}
    out = []
    for run in runs:
        name = run.result.get("cardType")
        if name not in types:
            try:
                types[name] = find_card_type(card_types, tenant, name) if name else None
            except Exception:  # a renamed or odd type only costs the entry its summary fields
                types[name] = None
        out.append(decision_of(run, types[name], now))
    return out


def list_decisions(
    agents: AgentLookup, card_types: CardTypes, runs: CardedRuns, tenant: str, agent_id: str, limit: int, token: str | None
) -> dict[str, object]:
    """The agent's result cards, newest first, as get_my_decisions shows them (plus the cards),
    one page at a time (a page may be short: each reads a bounded number of runs)."""
    if agents.get(tenant, check_id("agentId", agent_id)) is None:
        raise NotFound("agent not found", field="agentId")
    carded, nxt = runs.with_cards_page(tenant, agent_id, limit=limit, token=token)
    return page(_decisions(card_types, tenant, carded), nxt)
