"""USD prices per million tokens, by model family. A cache write costs 1.25x the input price with
the 5-minute TTL (the table's column) and 2x with the 1-hour TTL; a cache read 0.1x."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from engram.usage.models import Usage

if TYPE_CHECKING:
    from engram.engine.providers.base import ModelResponse


# (input, output, cache write, cache read) per million tokens.
_PRICES: list[tuple[str, tuple[float, float, float, float]]] = [
    # Older Opus generations first: "claude-opus-4-" would otherwise match them at the newer price.
    ("claude-opus-4-0", (15.0, 75.0, 18.75, 1.50)),
    ("claude-opus-4-1", (15.0, 75.0, 18.75, 1.50)),
    ("claude-opus-4-2025", (15.0, 75.0, 18.75, 1.50)),
    ("claude-3-opus", (15.0, 75.0, 18.75, 1.50)),
    ("claude-opus-", (5.0, 25.0, 6.25, 0.50)),
    ("claude-sonnet-", (3.0, 15.0, 3.75, 0.30)),
    ("claude-3-7-sonnet", (3.0, 15.0, 3.75, 0.30)),
    ("claude-3-5-sonnet", (3.0, 15.0, 3.75, 0.30)),
    ("claude-3-5-haiku", (0.80, 4.0, 1.0, 0.08)),
    ("claude-3-haiku", (0.25, 1.25, 0.30, 0.03)),
    ("claude-haiku-", (1.0, 5.0, 1.25, 0.10)),
    ("offline", (0.0, 0.0, 0.0, 0.0)),
]


ONE_HOUR_WRITE = 2.0  # times the input price


def family(model: str) -> str:
    # Bedrock ids look like "us.anthropic.claude-sonnet-4-5-20250929-v1:0".
    name = model.rsplit("anthropic.", 1)[-1]
    return re.sub(r"-v\d+:\d+$", "", name)


def prices_for(model: str) -> tuple[float, float, float, float] | None:
    name = family(model)
    for prefix, prices in _PRICES:
        if name.startswith(prefix):
            return prices
    return None


def cost_usd(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
    cache_write_1h_tokens: int = 0,
) -> float:
    """`cache_write_tokens` counts every write; `cache_write_1h_tokens` the part of them with
    the 1-hour TTL, priced at 2x the input price instead of the 5-minute 1.25x."""
    prices = prices_for(model)
    if prices is None:
        return 0.0
    p_in, p_out, p_cw, p_cr = prices
    one_hour = min(max(cache_write_1h_tokens, 0), cache_write_tokens)
    total = (
        input_tokens * p_in
        + output_tokens * p_out
        + (cache_write_tokens - one_hour) * p_cw
        + one_hour * p_in * ONE_HOUR_WRITE
        + cache_read_tokens * p_cr
    )
    return round(total / 1_000_000, 8)


def cache_savings_usd(model: str, *, cache_read_tokens: int, cache_write_tokens: int, cache_write_1h_tokens: int = 0) -> float:
    """What the cached tokens would have cost as ordinary input minus what they cost: a read saves
    0.9x the input price, a write costs 0.25x (5 minutes) or 1x (1 hour) more."""
    as_input = cost_usd(
        model, input_tokens=cache_read_tokens + cache_write_tokens, output_tokens=0, cache_read_tokens=0, cache_write_tokens=0
    )
    cached = cost_usd(
        model,
        input_tokens=0,
        output_tokens=0,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        cache_write_1h_tokens=cache_write_1h_tokens,
    )
    return round(as_input - cached, 8)


def priced_usage(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
) -> Usage:
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        cost_usd=cost_usd(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            cache_write_1h_tokens=cache_write_1h_tokens,
        ),
        cache_savings_usd=cache_savings_usd(
            model,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            cache_write_1h_tokens=cache_write_1h_tokens,
        ),
    )


# Anthropic's web search server tool: $10 per 1,000 searches (web fetch has no charge beyond tokens).
WEB_SEARCH_USD = 0.01


def usage_of(response: ModelResponse) -> Usage:
    """The priced usage of one model call (server tool searches included)."""
    t = response.tokens
    usage = priced_usage(
        response.model,
        input_tokens=t.input_tokens,
        output_tokens=t.output_tokens,
        cache_read_tokens=t.cache_read_tokens,
        cache_write_tokens=t.cache_write_tokens,
        cache_write_1h_tokens=t.cache_write_1h_tokens,
    )
    if t.web_search_requests:
        usage = usage.model_copy(update={"cost_usd": round(usage.cost_usd + t.web_search_requests * WEB_SEARCH_USD, 6)})
    return usage
