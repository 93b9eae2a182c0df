"""Long-term memory rows (agent and workspace scope)."""

import hashlib
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body, Confidence, Resource, Topic

# Whose memory: an agent's, a workspace's, or the user's (facts). The rows of the first two have
# an owner id (the agent's, the workspace's): OwnerScope.
MemoryScope = Literal["agent", "workspace", "user"]
OwnerScope = Literal["agent", "workspace"]
MemorySource = Literal["manual", "auto", "director", "chat", "profile"]
MemoryCategory = Literal["core", "daily", "conversation"]


class MemoryCreate(Body):
    """POST upserts by key. Lengths are checked against Settings (one place for the limits)."""

    key: str
    value: str
    source: Literal["manual"] = "manual"
    pinned: bool = False
    importance: Annotated[int, Field(ge=0, le=100)] = 0
    category: MemoryCategory = "core"
    confidence: Confidence = "asserted"
    topic: Topic | None = None


class MemoryUpdate(Body):
    value: str | None = None
    pinned: bool | None = None
    importance: Annotated[int, Field(ge=0, le=100)] | None = None
    category: MemoryCategory | None = None
    confidence: Confidence | None = None
    topic: Topic | None = None


class PinBody(Body):
    pinned: bool


class Memory(Resource):
    key: str
    value: str
    scope: MemoryScope
    source: MemorySource = "manual"
    category: MemoryCategory = "core"
    pinned: bool = False
    importance: int = 0
    confidence: Confidence = "asserted"
    topic: str | None = None
    last_referenced_at: str | None = None
    archived_at: str | None = None
    archived_reason: str | None = None
    session_id: str | None = None  # conversation-category rows belong to one session
    expires_at: int | None = None  # daily rows: epoch seconds, DynamoDB TTL
    origin: dict[str, Any] | None = None  # the run/session that wrote it
    superseded_by: str | None = None  # archived as `superseded`: the id of the row that replaced it


class MemoryEntry(BaseModel):
    """What the memory sections of a prompt show of a row and need to tell that it is live: the
    attributes their Query projects (memory.section), about a quarter of a row's bytes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    key: str
    value: str
    source: MemorySource = "manual"
    category: MemoryCategory = "core"
    pinned: bool = False
    session_id: str | None = None
    archived_at: str | None = None
    expires_at: int | None = None


# The stored attributes of a MemoryEntry (a row's are named as Memory's aliases).
ENTRY_ATTRIBUTES = tuple(to_camel(name) for name in MemoryEntry.model_fields)


def memory_id(scope: str, owner_id: str, key: str) -> str:
    digest = hashlib.sha256(f"{scope}\x00{owner_id}\x00{key}".encode()).hexdigest()
    return f"m_{digest[:30]}"


LEARNING_KEY_PREFIX = "director:learning:"


def is_director_learning(m: Memory) -> bool:
    """An agent-scope row the director stored with store_learning (RM4)."""
    return m.scope == "agent" and m.source == "director" and m.key.startswith(LEARNING_KEY_PREFIX)


def is_live(m: Memory | MemoryEntry, now: float | None = None) -> bool:
    """Active and not past its daily expiry (DynamoDB TTL deletes lazily, so reads check too)."""
    if m.archived_at:
        return False
    return not (m.expires_at and m.expires_at <= (now or time.time()))
