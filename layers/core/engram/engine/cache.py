"""Prompt cache breakpoints: where the `cache_control` markers of a request go, and their TTL.

The Messages API caches the prefix of a request (tools, then system, then messages) up to a
block marked `cache_control`; a later request that starts with the same bytes reads it at 0.1x
the input price instead of paying 1x. Writing an entry costs 1.25x (5-minute TTL) or 2x (1-hour
TTL). The API takes at most 4 markers, and ignores a marker whose prefix is shorter than the
model's minimum (it costs nothing then, but caches nothing either), so a marker is placed only
where the prefix is long enough (`min_cacheable_tokens`, by model family, with a conservative
default for ids it does not know). Candidates, in request order:

1. the persona block (tools + persona: the same for every turn of the agent);
2. the memory block (the session's memory snapshot, conversations.snapshot), or the last of the
   blocks after it that the running summary's next condensation leaves in place (`TurnContext.front`:
   memory added at cuts in front of the summary, its kept opening): every turn reads that entry,
   so it is still there when the condensation comes (the API keeps an entry 5 minutes from its
   last read);
3. the last of the session's blocks after the memory (the running summary's folds, CM8, and the
   memory added at cuts; conversations.context.session_context): the end of what a cut leaves in place. A
   cut changes the history's first message; the summary gains a fold there and the memory stored
   since a block, each a block of its own after the earlier ones, and the API finds the entry
   this marker wrote before the cut at the earlier blocks' end (it looks back up to 20 blocks
   from a marker), so the cut turn reads tools, persona, memory and the earlier summary from the
   cache;
4. the turn's own message, without the memory stored since the snapshot (it follows, uncached):
   the next turn's request holds this prefix unchanged, and finds it within the API's lookback
   of 20 blocks;
5. the newest message, in the turn's tool rounds (the rounds of one turn reuse each other).

When more than 4 qualify (a tool round with all of them), the earliest give way: the later
markers' lookback still reads the entries the turn's first request wrote at them.

Prefix sizes are estimated at four characters a token of the request's JSON, the same rule as
the memory budgets. Claude's tokenizers usually make more tokens than that of English and JSON,
so a prefix estimated at the minimum is usually at least that long; a marker that still falls
short costs nothing (the API just does not cache there).

TTL (`heartbeat_ttl`): chat turns use 5 minutes (a person answers within minutes; each read
refreshes the entry). A scheduled heartbeat that fires every I minutes, with 5 < I < 60, uses 1
hour on the stable prefix: with 5 minutes the entry is gone by the next heartbeat, so each one
pays a 1.25x write of the prefix P (1.25P a heartbeat, worse than no cache at 1P); with 1 hour
the first pays 2P and each later one reads at 0.1P, refreshing the entry. Over n heartbeats:
2 + 0.1(n-1) < 1.25n from n = 2 on (the second heartbeat already pays it back), and < n (no
cache at all) from n = 3. At I >= 60 minutes the 1-hour entry expires too (2P a heartbeat, the
worst), so such heartbeats use 5 minutes, which pays only within the run's own tool rounds. A
heartbeat on the shared session (Active Memory) also marks its history for an hour: the next
heartbeat's request starts with it. Longer TTLs must come before shorter ones in a request,
which this order keeps (1-hour markers are the prefix ones).

Bedrock takes the same markers; the 1-hour TTL only for the models AWS lists
(`bedrock_supports_1h`), and the provider drops the `ttl` (so 5 minutes) for the others.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engram.engine.pricing import family
from engram.engine.prompt import tokens_of

FIVE_MINUTES = "5m"
ONE_HOUR = "1h"
MAX_BREAKPOINTS = 4
DEFAULT_MIN_TOKENS = 4096  # the largest minimum of any current model: safe for an unknown id

# (model family prefix, minimum cacheable prompt tokens), first match wins: the Anthropic prompt
# caching docs' table (Opus 4.5+ and Haiku 4.5: 4,096; Sonnet 4.6, Haiku 3.x: 2,048; Sonnet
# 3.7 to 4.5, Opus 4 and 4.1: 1,024).
_MINIMUMS: list[tuple[str, int]] = [
    ("claude-opus-4-0", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4-2025", 1024),
    ("claude-opus-4", 4096),
    ("claude-sonnet-4-0", 1024),
    ("claude-sonnet-4-2025", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-7-sonnet", 1024),
    ("claude-3-5-sonnet", 1024),
    ("claude-3-opus", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
    ("claude-haiku-4", 4096),
]

# Bedrock's extended (1-hour) prompt cache TTL, per its prompt caching docs.
_BEDROCK_1H = ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-5")


def min_cacheable_tokens(model: str) -> int:
    name = family(model)
    for prefix, tokens in _MINIMUMS:
        if name.startswith(prefix):
            return tokens
    return DEFAULT_MIN_TOKENS


def bedrock_supports_1h(model: str) -> bool:
    return family(model).startswith(_BEDROCK_1H)


def heartbeat_ttl(interval: timedelta | None) -> str:
    """The TTL of a scheduled heartbeat's stable prefix, from its schedule's shortest interval
    (the module doc has the arithmetic): 1 hour when 5 min < interval < 1 hour, else 5 minutes."""
    if interval is None:
        return FIVE_MINUTES
    seconds = interval.total_seconds()
    return ONE_HOUR if 300 < seconds < 3600 else FIVE_MINUTES


@dataclass(frozen=True)
class CachePolicy:
    """TTLs of one turn's markers: the stable prefix (persona, memory) and the history."""

    prefix_ttl: str = FIVE_MINUTES
    history_ttl: str = FIVE_MINUTES

    def marker(self, ttl: str) -> dict[str, str]:
        return {"type": "ephemeral", "ttl": ONE_HOUR} if ttl == ONE_HOUR else {"type": "ephemeral"}


@dataclass(frozen=True)
class Breakpoint:
    where: str  # "persona", "memory", "turn" or "newest"
    tokens: int  # estimated prefix length up to and including the marked block
    ttl: str


def _size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _with_marker(block: Mapping[str, object], marker: dict[str, str]) -> dict[str, object]:
    return {**block, "cache_control": marker}


def _content(message: dict[str, Any]) -> list[dict[str, object]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def mark(
    model: str,
    tools: Sequence[Mapping[str, object]],
    system: Sequence[Mapping[str, object]],
    messages: list[dict[str, object]],
    *,
    turn_start: int,
    stable_blocks: int | None = None,
    policy: CachePolicy = CachePolicy(),
    memory_index: int | None = 1,
    summary_index: int | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Breakpoint]]:
    """Copies of `system` and `messages` with at most 4 markers (see the module doc), and where
    they went. `turn_start`: the index of the turn's own message; `stable_blocks`: how many of
    its leading blocks are the user's (the rest, memory stored since the snapshot, is left
    after the marker); `memory_index`: the system block of the memory sections, if any;
    `summary_index`: the last of the session's blocks after the memory (summary, memory added at
    cuts), if any."""
    minimum = min_cacheable_tokens(model)
    out_system = [dict(b) for b in system]
    out_messages = list(messages)
    # (breakpoint, system block index or None, message index, content block index)
    wanted: list[tuple[Breakpoint, int | None, int, int]] = []
    used = _size(tools)

    def want(where: str, prefix_chars: int, ttl: str, at: tuple[int | None, int, int]) -> None:
        tokens = tokens_of(prefix_chars)
        if tokens >= minimum and not (wanted and wanted[-1][0].tokens == tokens):
            wanted.append((Breakpoint(where, tokens, ttl), *at))

    names = {0: "persona", memory_index: "memory", summary_index: "summary"}
    for i, block in enumerate(system):
        used += _size(block)
        if i in names:
            want(names[i], used, policy.prefix_ttl, (i, 0, 0))
    contents: dict[int, list[dict[str, Any]]] = {}
    for i, message in enumerate(messages):
        content = contents.setdefault(i, _content(message))
        if i == turn_start:
            stable = len(content) if stable_blocks is None else max(1, min(stable_blocks, len(content)))
            before = used + _size({"role": message.get("role"), "content": content[:stable]})
            want("turn", before, policy.history_ttl, (None, i, stable - 1))
        used += _size(message)
        if i == len(messages) - 1 and i != turn_start and content:
            want("newest", used, policy.history_ttl, (None, i, len(content) - 1))
    placed = wanted[-MAX_BREAKPOINTS:]  # the earliest give way
    for point, system_index, message_index, block_index in placed:
        marker = policy.marker(point.ttl)
        if system_index is not None:
            out_system[system_index] = _with_marker(system[system_index], marker)
            continue
        content = contents[message_index]
        content[block_index] = _with_marker(content[block_index], marker)
        out_messages[message_index] = {**messages[message_index], "content": content}
    return out_system, out_messages, [point for point, *_ in placed]
