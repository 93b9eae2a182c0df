"""Keep a session's history within a message cap without producing a sequence the Messages API rejects.

Trimming only ever removes from the front: the newest messages matter most, and what is removed
is handed back (``TrimResult.trimmed``) so it can be archived rather than lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TRIMMED_TURN_NOTICE = "[Earlier messages of this turn were trimmed to fit the history cap.]"

# Block types we expect to send, and which role may carry them; anything else is reported.
# Anthropic's server tools (web search, web fetch): their use and its result sit together in the
# assistant message, and are sent back as they came (TL6).
_SERVER_TOOL_TYPES = frozenset({"server_tool_use", "web_search_tool_result", "web_fetch_tool_result"})
_KNOWN_TYPES = (
    frozenset({"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}) | _SERVER_TOOL_TYPES
)
_ASSISTANT_ONLY = frozenset({"tool_use", "thinking", "redacted_thinking"}) | _SERVER_TOOL_TYPES
_USER_ONLY = frozenset({"tool_result", "image", "document"})


@dataclass(frozen=True)
class TrimResult:
    """``trimmed + kept == input``, except that ``kept`` starts with a synthetic notice when ``split_turn``."""

    kept: list[dict[str, Any]]
    trimmed: list[dict[str, Any]]
    split_turn: bool = field(default=False)  # kept[0] is the synthetic notice, not an input message


def trimmed_turn_notice() -> dict[str, object]:
    """A fresh copy each time, so a caller mutating one history cannot alter another."""
    return {"role": "user", "content": [{"type": "text", "text": TRIMMED_TURN_NOTICE}]}


def _blocks(message: object) -> list[Any] | None:
    """A message's content as a block list (a plain string is one text block); None if malformed."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return None


def is_turn_start(message: object) -> bool:
    """A user message that answers no tool call: the only safe first message of a sequence."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    blocks = _blocks(message)
    return blocks is not None and not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)


def trim_history(messages: list[dict[str, object]], cap: int) -> TrimResult:
    """Longest suffix of at most ``cap`` messages that starts a turn, so no tool_use loses its tool_result.

    If the newest turn alone exceeds the cap, keep its newest messages from an assistant message
    (never between a tool_use and its results) behind a synthetic user notice, which counts against
    the cap; if not even that fits, keep nothing. Messages are not copied. O(cap) scanning.
    """
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 2:
        raise ValueError(f"history cap must be an integer >= 2, got {cap!r}")
    n = len(messages)
    for i in range(max(0, n - cap), n):
        if is_turn_start(messages[i]):
            return TrimResult(kept=list(messages[i:]), trimmed=list(messages[:i]))
    # No turn starts within the cap: the newest turn is longer than the cap (or the history is headless).
    for j in range(max(0, n - cap + 1), n):
        m = messages[j]
        if isinstance(m, dict) and m.get("role") == "assistant":
            return TrimResult(kept=[trimmed_turn_notice(), *messages[j:]], trimmed=list(messages[:j]), split_turn=True)
    return TrimResult(kept=[], trimmed=list(messages))


def trim_in_steps(messages: list[dict[str, object]], cap: int) -> TrimResult:
    """Like ``trim_history``, but a history past the cap is cut back to about half of it. The
    cached prompt prefix (engine.cache) holds the history from its first message, so each cut
    breaks it: cut in steps, the first message changes once every cap/2 messages instead of on
    every turn. A cut never keeps less than half the cap (CM8): it starts at the newest turn
    start that leaves at least cap/2 messages (so a little more than half may be kept); only
    when no turn starts between the cap and its half (a turn longer than half the cap) does it
    keep what ``trim_history`` keeps within the cap."""
    n = len(messages)
    if n <= cap:
        return trim_history(messages, cap)
    half = max(2, cap // 2)
    for i in range(n - half, n - cap - 1, -1):
        if i >= 0 and is_turn_start(messages[i]):
            return TrimResult(kept=list(messages[i:]), trimmed=list(messages[:i]))
    return trim_history(messages, cap)


def sequence_problems(messages: Sequence[Mapping[str, object]], *, allow_pending_tool_use: bool = False) -> list[str]:  # noqa: C901 - one branch per Messages API rule
    """Why the Messages API would reject ``messages`` (empty list: nothing found). One O(n) pass.

    ``allow_pending_tool_use`` accepts a final assistant tool_use without results, as in a stored
    history caught mid-round; a sequence about to be sent must not end that way.
    """
    if not isinstance(messages, list) or not messages:
        return ["the sequence is empty"]
    problems: list[str] = []
    seen_use_ids: set[str] = set()
    prev_role: Any = None
    prev_uses: list[str] = []  # tool_use ids of the previous message, which this one must answer
    last = len(messages) - 1
    for i, message in enumerate(messages):
        where = f"message {i}"
        if not isinstance(message, dict):
            problems.append(f"{where} is not an object")
            if prev_uses:
                problems.append(f"message {i - 1}: tool_use {', '.join(prev_uses)} not answered in message {i}")
            prev_role, prev_uses = None, []
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where} has role {role!r}; expected 'user' or 'assistant'")
        elif role == prev_role:
            problems.append(f"{where} has role {role!r} like the message before it; roles must alternate")
        if i == 0 and role != "user":
            problems.append(f"{where} must be a user message; the sequence starts with {role!r}")

        blocks = _blocks(message)
        if blocks is None:
            problems.append(f"{where} content must be a string or a list of blocks")
            blocks = []
        elif message.get("content") in ("", []) and not (role == "assistant" and i == last):
            problems.append(f"{where} has no content")  # the API allows only a final assistant message to be empty

        uses: list[str] = []
        answered: set[str] = set()
        after_non_result = False
        for k, block in enumerate(blocks):
            at = f"{where} block {k}"
            if not isinstance(block, dict):
                problems.append(f"{at} is not an object")
                after_non_result = True
                continue
            kind = block.get("type")
            if kind not in _KNOWN_TYPES:
                problems.append(f"{at} has unknown type {kind!r}")
            elif kind in _ASSISTANT_ONLY and role != "assistant":
                problems.append(f"{at}: {kind} is only allowed in assistant messages")
            elif kind in _USER_ONLY and role != "user":
                problems.append(f"{at}: {kind} is only allowed in user messages")
            if kind == "text" and not isinstance(block.get("text"), str):
                problems.append(f"{at}: text block has no text string")
            if kind == "tool_use" and role == "assistant":
                use_id = block.get("id")
                if not isinstance(use_id, str) or not use_id:
                    problems.append(f"{at}: tool_use has no id")
                elif use_id in seen_use_ids:
                    problems.append(f"{at}: tool_use id {use_id} is not unique")
                else:
                    seen_use_ids.add(use_id)
                    uses.append(use_id)
                if not isinstance(block.get("name"), str) or not block.get("name"):
                    problems.append(f"{at}: tool_use has no name")
            if kind == "tool_result" and role == "user":
                use_id = block.get("tool_use_id")
                if i == 0:
                    problems.append(f"{at}: the first message must not carry a tool_result")
                elif use_id not in prev_uses:
                    problems.append(f"{at}: tool_result {use_id} answers no tool_use of message {i - 1}")
                elif use_id in answered:
                    problems.append(f"{at}: tool_result {use_id} answers a tool_use already answered")
                if after_non_result:
                    problems.append(f"{at}: tool_result blocks must come before any other block")
                answered.add(str(use_id))
            else:
                after_non_result = True

        unanswered = [u for u in prev_uses if u not in answered]
        if unanswered:
            problems.append(f"message {i - 1}: tool_use {', '.join(unanswered)} not answered in message {i}")
        prev_role, prev_uses = role, (uses if role == "assistant" else [])

    if prev_uses and not allow_pending_tool_use:
        problems.append(f"message {last}: tool_use {', '.join(prev_uses)} has no tool_result (the sequence ends pending)")
    return problems
