"""Use cases of user facts, shared by the REST routes and the model's tools."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from engram.aws.keys import inverse_recency
from engram.facts.models import Fact, FactUpdate, MeUpdate, normalised
from engram.facts.ports import DuplicateText
from engram.kernel.errors import BadRequest, Conflict, NotFound
from engram.kernel.ids import check_id, new_id
from engram.kernel.model import now_iso, page_ranked
from engram.kernel.textsearch import text_query
from engram.kernel.validation import check_text, refuse_secrets
from engram.usage import service as usage

if TYPE_CHECKING:
    from engram.facts.ports import Facts, Profiles
    from engram.kernel.settings import Settings
    from engram.usage.ports import UsageLedger


def add_fact(
    facts: Facts,
    settings: Settings,
    tenant: str,
    text: str,
    *,
    source: str,
    confidence: str,
    topic: str | None = None,
    origin: Mapping[str, object] | None = None,
) -> tuple[Fact, bool]:
    """Adds a fact (referenced at creation, so it can enter the prompt's top 10 at once).
    Restating an active fact refreshes it instead of duplicating it. The duplicate check reads
    the row of the normalised text, not every fact (facts/repository.py)."""
    text = check_text("fact", text, settings.fact_min_chars, settings.fact_max_chars)
    refuse_secrets("fact", text)
    for _ in range(3):  # a concurrent add of the same text wins the claim: look again
        now = now_iso()
        existing, holder, indexed = facts.by_text(tenant, text)
        if not indexed:
            facts.index_texts(tenant)
            existing, holder, _ = facts.by_text(tenant, text)
        if existing is not None and existing.archived_at is None and normalised(existing.fact) == normalised(text):
            refreshed = existing.model_copy(
                update={"last_referenced_at": now, "updated_at": now, "topic": topic or existing.topic}
            )
            if confidence == "asserted":
                refreshed = refreshed.model_copy(update={"confidence": "asserted"})
            facts.put(tenant, refreshed, expect_updated_at=existing.updated_at)
            return refreshed, False
        fact = Fact(
            id=new_id("f"),
            created_at=now,
            updated_at=now,
            fact=text,
            source=source,
            confidence=confidence,
            topic=topic,
            last_referenced_at=now,
            origin=origin,
        )
        try:
            facts.create(tenant, fact, limit=settings.max_facts, replacing=holder)
        except DuplicateText:
            continue
        return fact, True
    raise Conflict("the fact was being added concurrently; retry", field="fact", code="fact_changed")


def _list_rank(f: Fact) -> str:
    """Active first, then most recently referenced (the order the prompt picks them in)."""
    return f"{1 if f.archived_at else 0}#{inverse_recency(f.last_referenced_at or f.created_at):013d}#{f.id}"


def list_facts(
    facts: Facts, tenant: str, *, include_archived: bool = False, limit: int, token: str | None, q: str | None = None
) -> dict[str, object]:
    """One page of the caller's facts in `_list_rank` order, after the token's rank (the order
    mixes active and archived facts, which no index holds together, so the facts are read and
    ordered: the response is bounded by `limit`, the read by the caller's facts). `q` keeps the
    facts whose words or topic match it, best match first as recall ranks them."""
    rows = [f for f in facts.all(tenant) if include_archived or f.archived_at is None]
    query = text_query(q)
    if query is None:
        return page_ranked(rows, _list_rank, list_id="facts", limit=limit, token=token)
    scores = {f.id: query.score(f.fact, f.topic) for f in rows}
    found = [f for f in rows if scores[f.id]]
    return page_ranked(
        found, lambda f: query.rank(scores[f.id], _list_rank(f)), list_id=query.list_id("facts"), limit=limit, token=token
    )


def get_fact(facts: Facts, tenant: str, fact_id: str) -> Fact:
    fact = facts.get(tenant, check_id("factId", fact_id))
    if fact is None:
        raise NotFound("fact not found", field="factId")
    return fact


def update_fact(facts: Facts, settings: Settings, tenant: str, fact_id: str, body: FactUpdate) -> Fact:
    fact = get_fact(facts, tenant, fact_id)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    if "fact" in changes:
        if changes["fact"] is None:
            raise BadRequest("fact cannot be null", field="fact")
        changes["fact"] = check_text("fact", changes["fact"], settings.fact_min_chars, settings.fact_max_chars)
        refuse_secrets("fact", changes["fact"])
    if "confidence" in changes and changes["confidence"] is None:
        raise BadRequest("confidence cannot be null", field="confidence")
    archived = changes.pop("archived", None)
    reason = changes.pop("archived_reason", None)
    now = now_iso()
    if archived is True:
        changes.update(archived_at=fact.archived_at or now, archived_reason=reason or "user_deleted")
    elif archived is False:
        changes.update(archived_at=None, archived_reason=None)  # a restore is not a reference: lastReferencedAt stays
    elif reason is not None:
        raise BadRequest("archivedReason goes with archived: true", field="archivedReason")
    updated = fact.model_copy(update={**changes, "updated_at": now})
    active_before, limit = fact.archived_at is None, settings.max_facts
    if updated.archived_at is None and (fact.archived_at is not None or normalised(updated.fact) != normalised(fact.fact)):
        # The duplicate check must find this fact under its (new) text from now on.
        facts.put_reindexed(tenant, updated, expect_updated_at=fact.updated_at, was_active=active_before, limit=limit)
    else:
        facts.put(tenant, updated, expect_updated_at=fact.updated_at, was_active=active_before, limit=limit)
    return updated


def archive_fact(facts: Facts, tenant: str, fact_id: str, reason: str) -> Fact:
    fact = get_fact(facts, tenant, fact_id)
    if fact.archived_at:
        return fact
    now = now_iso()
    archived = fact.model_copy(update={"archived_at": now, "archived_reason": reason, "updated_at": now})
    facts.put(tenant, archived, expect_updated_at=fact.updated_at, was_active=True)
    return archived


# --- the person's name: the speaker of their archived turns (recall.policy.ArchivePolicy) ----------
_NAME_MAX = 100
_STATED_NAME = re.compile(
    r"\b(?i:my name is|my name's|call me|i am called|i'm called)\s{1,3}"
    r"(?P<name>[A-Z][\w'-]{0,40}(?:\s[A-Z][\w'-]{0,40})?)"
)


def me(profiles: Profiles, ledger: UsageLedger, tenant: str) -> dict[str, object]:
    return {"name": profiles.name(tenant), "limits": usage.my_limits(ledger, tenant)}


def set_my_name(profiles: Profiles, tenant: str, name: str | None) -> dict[str, object]:
    """PATCH /api/me: the name is checked like every text Engram stores (no secret in it)."""
    if name is not None:
        name = check_text("name", name, 1, _NAME_MAX)
        refuse_secrets("name", name)
    profiles.set_name(tenant, name)
    return {"name": name}


def update_me(profiles: Profiles, ledger: UsageLedger, tenant: str, body: MeUpdate) -> dict[str, object]:
    """PATCH /api/me: the fields the body names (name, limits); the profile as it now is."""
    given = body.model_fields_set
    if not given:
        raise BadRequest("the body names no field to change", field="body", code="empty_update")
    name = set_my_name(profiles, tenant, body.name)["name"] if "name" in given else profiles.name(tenant)
    limits = usage.set_my_limits(ledger, tenant, body.limits) if "limits" in given else usage.my_limits(ledger, tenant)
    return {"name": name, "limits": limits}


def stated_name(message: str) -> str | None:
    """The name a person gives in a message ("my name is Caroline", "call me Mel"): a capitalised
    word or two, as typed."""
    found = _STATED_NAME.search(message[:2000])
    return found.group("name") if found else None
