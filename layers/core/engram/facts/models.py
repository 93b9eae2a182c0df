"""User facts: what an agent knows about its user."""

import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import StringConstraints

from engram.kernel.model import Body, Confidence, Resource, Topic
from engram.usage.models import UserLimits


class FactCreate(Body):
    fact: str
    topic: Topic | None = None
    confidence: Confidence = "asserted"


class FactUpdate(Body):
    fact: str | None = None
    topic: Topic | None = None
    confidence: Confidence | None = None
    archived: bool | None = None
    archived_reason: Literal["user_deleted", "user_corrected"] | None = None


class Fact(Resource):
    fact: str
    source: Literal["chat", "profile", "inferred"] = "chat"
    confidence: Confidence = "inferred"
    topic: str | None = None
    last_referenced_at: str | None = None
    archived_at: str | None = None
    archived_reason: str | None = None
    origin: dict[str, Any] | None = None


_WORD = re.compile(r"[a-z0-9]+")


def normalised(text: str) -> str:
    """What makes two facts the same fact: their words, lower-cased, punctuation and spacing aside."""
    return " ".join(_WORD.findall(text.lower()))


def text_digest(text: str) -> str:
    """The key of a fact's normalised text in the duplicate check."""
    return hashlib.sha256(normalised(text).encode()).hexdigest()


PersonName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


class MeUpdate(Body):
    """PATCH /api/me: the person's name (null removes it), the speaker of their archived turns;
    their spending limits over all their agents (TL10; null or {} removes them)."""

    name: PersonName | None = None
    limits: UserLimits | None = None
