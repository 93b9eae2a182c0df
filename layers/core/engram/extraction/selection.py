"""Which of the model's candidate facts become memory rows, pure (no I/O but a log line): the
EX2-EX5 rules over the candidates (confidence, scope, secrets, duplicates, what they supersede, at
most five), then the rows one transaction writes for them (`plan_writes`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram.extraction.models import Candidate, RowWrite
from engram.kernel.observability import logger
from engram.kernel.secrets import find_secret, repeats_secret
from engram.memory.models import Memory, memory_id

MAX_FACTS = 5
MIN_CONFIDENCE = 0.6
DUPLICATE_JACCARD = 0.8  # dropped when the similarity EXCEEDS this
ASSERTED_CONFIDENCE = 0.9  # at or above: stored as `asserted`, else `inferred`
SLUG_CHARS = 60

_WORD = re.compile(r"[a-z0-9]+")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """EX3: lowercase, runs of non-alphanumerics to `-`, trimmed to 60 characters."""
    return _NON_ALNUM.sub("-", text.lower()).strip("-")[:SLUG_CHARS].strip("-")


def auto_key(slug: str, value: str) -> str:
    return "auto:" + (slugify(slug) or slugify(value) or "fact")


def word_set(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass
class Pending:
    scope: str
    owner_id: str
    key: str
    value: str
    confidence: float
    target: Memory | None  # the existing row it supersedes


def _target_of(c: Candidate, scope: str, loaded: list[Memory]) -> Memory | None:
    if not c.supersedes:
        return None
    named = c.supersedes.strip()
    matches = [m for m in loaded if m.key == named or m.key == f"auto:{named}"]
    matches.sort(key=lambda m: m.scope != scope)  # the candidate's own scope first
    return matches[0] if matches else None


def choose(
    candidates: list[Candidate],
    *,
    targets: dict[str, str],
    loaded: list[Memory],
    value_max_chars: int,
    transcript_secrets: set[str] | None = None,
) -> tuple[list[Pending], Counter[str]]:
    """EX2-EX5 on the model's candidates, most confident first: which to keep, and why the rest went.
    `transcript_secrets` (`secret_values` of the transcript) drops a candidate that repeats one
    without saying what it is ("The user's favourite number is 482913")."""
    dropped: Counter[str] = Counter()
    kept: list[Pending] = []
    kept_words: list[frozenset[str]] = []
    loaded_words = [(m, word_set(m.value)) for m in loaded]
    for c in sorted(candidates, key=lambda c: -c.confidence):  # stable: the model's order breaks ties
        if c.confidence < MIN_CONFIDENCE:
            dropped["low_confidence"] += 1
            continue
        scope = c.scope if "workspace" in targets else "agent"  # EX3: no workspace, every fact is the agent's
        if scope not in targets:
            dropped["agent_memory_off"] += 1
            continue
        value = " ".join(c.value.split())
        if not value or len(value) > value_max_chars:
            dropped["invalid"] += 1
            continue
        kind = find_secret(value) or find_secret(c.slug)
        if not kind and repeats_secret(value, transcript_secrets or set()):
            kind = "a secret from the transcript"
        if kind:
            dropped["secret"] += 1
            logger.info("extraction candidate dropped: it holds a secret", extra={"kind": kind})  # never the text
            continue
        key = auto_key(c.slug, value)
        target = _target_of(c, scope, loaded)
        words = word_set(value)
        if any(jaccard(words, w) > DUPLICATE_JACCARD for m, w in loaded_words if m is not target) or any(
            jaccard(words, w) > DUPLICATE_JACCARD for w in kept_words
        ):
            dropped["duplicate"] += 1
            continue
        if any(p.key == key and p.scope == scope for p in kept):
            dropped["duplicate"] += 1
            continue
        if target is not None and target.source == "manual":
            dropped["contradicts_manual"] += 1  # the user's own entry is authoritative
            continue
        if target is not None and target.pinned:
            dropped["contradicts_pinned"] += 1
            continue
        if len(kept) >= MAX_FACTS:
            dropped["over_limit"] += 1
            continue
        kept.append(Pending(scope, targets[scope], key, value, c.confidence, target))
        kept_words.append(words)
    return kept, dropped


def plan_writes(
    pending: list[Pending],
    *,
    stored: dict[str, Memory],
    targets: dict[str, str],
    origin: Mapping[str, object],
    now: str,
) -> tuple[list[RowWrite], list[str], list[str], Counter[str]]:
    """The rows to put: new or updated auto rows, and the rows they supersede (archived, linked)."""
    writes: list[RowWrite] = []
    kept: list[str] = []
    superseded: list[str] = []
    dropped: Counter[str] = Counter()
    touched: set[str] = set()
    for p in pending:
        mid = memory_id(p.scope, p.owner_id, p.key)
        existing = stored.get(mid)
        if existing is not None and existing.source != "auto":
            dropped["key_taken"] += 1  # an `auto:` key someone wrote by hand: not ours to overwrite
            continue
        if existing is not None and existing.archived_at and existing.archived_reason != "superseded":
            dropped["forgotten"] += 1  # forgotten on purpose: extraction does not bring it back
            continue
        if mid in touched:
            dropped["duplicate"] += 1
            continue
        base: dict[str, Any] = (
            existing.model_dump() if existing else {"id": mid, "created_at": now, "key": p.key, "scope": p.scope}
        )
        base.update(
            value=p.value,
            source="auto",
            category="core",
            confidence="asserted" if p.confidence >= ASSERTED_CONFIDENCE else "inferred",
            updated_at=now,
            archived_at=None,
            archived_reason=None,
            superseded_by=None,
            session_id=None,
            expires_at=None,
            origin={**origin, "confidence": round(p.confidence, 3)},
        )
        row = Memory.model_validate(base)
        writes.append(RowWrite(row, p.owner_id, existing.updated_at if existing else None))
        touched.add(mid)
        kept.append(p.key)
        target = p.target
        if target is None:
            continue
        if target.id == mid:
            if existing is not None and existing.archived_at is None:
                # A contradiction under the same key: the row takes the new value in place and its
                # old value stays as an archived history row that points at it.
                history_id = memory_id(p.scope, p.owner_id, f"{p.key}@{existing.updated_at}")
                history = existing.model_copy(
                    update={
                        "id": history_id,
                        "archived_at": now,
                        "archived_reason": "superseded",
                        "superseded_by": mid,
                        "updated_at": now,
                    }
                )
                writes.append(RowWrite(history, p.owner_id, None))
                superseded.append(history_id)
            continue
        if target.id in touched:
            continue  # one row, one change per transaction
        archived = target.model_copy(
            update={"archived_at": now, "archived_reason": "superseded", "superseded_by": mid, "updated_at": now}
        )
        writes.append(RowWrite(archived, targets[target.scope], target.updated_at))
        touched.add(target.id)
        superseded.append(target.id)
    return writes, kept, superseded, dropped
