"""The model's `conversation_search` tool over the conversation archive."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from engram.engine.tools import Tool, ToolContext, ToolRegistry
from engram.kernel.ids import ID_PATTERN
from engram.recall.index import TOOL_TEXT_CHARS, conversation_search
from engram.wiring.stores import stores_of


class ConversationSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1, max_length=500, description="Words to look for: topics, names, phrases, or a date such as 'May 2024'."
    )
    limit: int = Field(default=5, ge=1, le=20, description="How many messages to return (1-20).")
    session_id: str | None = Field(default=None, pattern=ID_PATTERN, description="Only search this session.")


def _ago(created_at: str | None, now: datetime) -> str:
    if not created_at:
        return ""
    try:
        then = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return ""
    delta = now - then
    if delta < timedelta(minutes=1):
        return "just now"
    if delta < timedelta(hours=1):
        return f"{int(delta.total_seconds() // 60)} min ago"
    if delta < timedelta(days=1):
        return f"{int(delta.total_seconds() // 3600)} h ago"
    return f"{delta.days} d ago"


def _tool(ctx: ToolContext, args: ConversationSearchInput) -> object:
    hits = conversation_search(
        stores_of(ctx).archive, ctx.tenant, ctx.agent.id, args.query, limit=args.limit, session_id=args.session_id
    )
    if not hits:
        where = f"session {args.session_id}" if args.session_id else "any session"
        return f'No matches: nothing said earlier in {where} matches "{args.query}".'
    now = datetime.now(UTC)
    out = []
    for hit in hits:
        text = hit["text"]
        if len(text) > TOOL_TEXT_CHARS:
            text = text[: TOOL_TEXT_CHARS - 1].rstrip() + "…"
        entry = {"session": hit["sessionId"], "time": hit["createdAt"], "ago": _ago(hit["createdAt"], now), "role": hit["role"]}
        if hit.get("speaker"):
            entry["speaker"] = hit["speaker"]
        entry["text"] = text
        out.append(entry)
    return out


_INTENTS = [
    re.compile(
        r"\bsearch\s+(?:(?:our|my|the|all|past|previous|earlier|old)\s+)*(?:(?:conversations?|chats?|history|messages?)\s+)+(?:for|about)\s+(?P<q>.+)",
        re.I,
    ),
    re.compile(
        r"\b(?:did|have)\s+(?:we|i|you)\s+(?:ever\s+)?(?:talk|talked|speak|spoken|spoke|chat|chatted|discuss|discussed)\s+(?:about\s+)?(?P<q>.+)",
        re.I,
    ),
    re.compile(r"\bwhat\s+did\s+(?:i|you|we)\s+(?:say|tell\s+you|mention|write)\s+about\s+(?P<q>.+)", re.I),
    re.compile(r"\bdid\s+(?:i|we)\s+(?:ever\s+)?mention\s+(?P<q>.+)", re.I),
]


def _intent(text: str) -> dict[str, object] | None:
    for rx in _INTENTS:
        m = rx.search(text)
        if m:
            query = m.group("q").strip().strip("?!.\"'").strip()
            if query:
                return {"query": query[:500]}
    return None


def register_tools(registry: ToolRegistry) -> None:
    """Adds the `conversation_search` tool to a ToolRegistry."""
    registry.register(
        Tool(
            name="conversation_search",
            description=(
                "Searches everything said earlier between you and this user, in every session of this agent, "
                "including messages too old to still be in this conversation. Returns the best-matching messages "
                "with their session, time and text. Use it when the user refers to something discussed before that "
                "you cannot see, or asks what was said about a topic. Query with distinctive words (names, topics); "
                "a date ('in May 2024', 'last week') narrows by time."
            ),
            input_model=ConversationSearchInput,
            handler=_tool,
            offline_intent=_intent,
        )
    )
