"""The tool loop: call the model, run the tools it asks for, repeat until it answers in text."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.engine import timeline
from engram.engine.cache import CachePolicy, mark
from engram.engine.events import TurnEvents
from engram.engine.holds import held_uses
from engram.engine.pricing import usage_of
from engram.engine.providers.base import SERVER_TOOLS, ModelProvider
from engram.engine.tools import ToolContext, ToolOutcome, ToolRegistry
from engram.kernel.errors import TurnTimeout
from engram.kernel.trace import trace_of
from engram.usage.limits import SpendGuard
from engram.usage.models import Usage

# Below this, another model call cannot finish inside the turn's budget.
_MIN_CALL_SECONDS = 1.0


@dataclass
class LoopResult:
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    reply: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    # TL10: the last answer's tool uses held for the owner's approval, and the results of its
    # other uses (run as usual); the turn pauses (engine.approval).
    pending: list[dict[str, Any]] = field(default_factory=list)
    obtained: list[dict[str, Any]] = field(default_factory=list)
    # A resumed turn: the usage recorded at its pause, and its part's number (its usage rows' ids).
    spent_before: dict[str, Usage] = field(default_factory=dict)
    segment: int = 0

    @property
    def usage(self) -> Usage:
        total = Usage()
        for usage in self.usage_by_model.values():
            total = total + usage
        return total


def for_model(message: dict[str, object]) -> dict[str, object]:
    """A stored message as the model gets it: its role and content only (a transcript keeps
    metadata such as a scheduled run's `meta` beside them, never sent)."""
    return {"role": message["role"], "content": message["content"]} if len(message) > 2 else message


def _result_content(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def offered_tools(registry: ToolRegistry, ctx: ToolContext, provider: str = "") -> list[dict[str, object]]:
    """The turn's tools: the agent's external tools first, sorted by name, then the registry's, so
    the start of the cached prefix changes only when a server's tool list does (TL2); last, the
    Anthropic server tools the agent enabled, where the provider is the Anthropic API (TL6)."""
    external = sorted((spec for toolset in ctx.toolsets for spec in toolset.specs()), key=lambda spec: str(spec["name"]))
    agent = ctx.agent
    server = [SERVER_TOOLS[n] for n in getattr(agent, "server_tools", []) if n in SERVER_TOOLS] if provider == "anthropic" else []
    return [*external, *registry.specs(ctx=ctx), *server]


def _run_tools(uses: list[dict[str, Any]], registry: ToolRegistry, ctx: ToolContext, deadline: float) -> list[ToolOutcome]:
    """The outcomes in the uses' order: a toolset's calls run together (in parallel), the
    registry's one after another."""
    outcomes: dict[int, ToolOutcome] = {}
    for toolset in ctx.toolsets:
        mine = [i for i, use in enumerate(uses) if toolset.owns(use["name"])]
        if mine:
            batch = [uses[i] for i in mine]
            done = timeline.toolset_calls(ctx, batch, lambda: toolset.call_many(batch, ctx, deadline))  # noqa: B023 (called at once)
            for i, outcome in zip(mine, done, strict=True):
                outcomes[i] = outcome
    for i, use in enumerate(uses):
        if i not in outcomes:
            outcomes[i] = timeline.registry_call(ctx, use, lambda: registry.call(use["name"], use.get("input"), ctx))  # noqa: B023
    return [outcomes[i] for i in range(len(uses))]


def _call_tools(
    uses: list[dict[str, object]],
    registry: ToolRegistry,
    ctx: ToolContext,
    deadline: float,
    out: LoopResult,
    events: TurnEvents | None,
) -> list[dict[str, object]]:
    """Runs one answer's tool uses; each call is kept in `out` and announced to `events`; returns
    the tool_result blocks for the model."""
    if events is not None:
        for use in uses:
            events.tool_started(use)
    results = []
    for use, outcome in zip(uses, _run_tools(uses, registry, ctx, deadline), strict=True):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use["id"], "content": _result_content(outcome.content)}
        if outcome.is_error:
            block["is_error"] = True
        results.append(block)
        out.tool_calls.append(
            {
                "name": use["name"],
                "input": use.get("input") or {},
                "result": outcome.content,
                "isError": outcome.is_error,
                "toolUseId": use["id"],
                **outcome.record,
            }
        )
        if events is not None:
            events.tool_finished(out.tool_calls[-1])
    return results


def run_loop(
    *,
    provider: ModelProvider,
    registry: ToolRegistry,
    ctx: ToolContext,
    model: str,
    system: Sequence[Mapping[str, object]],
    messages: list[dict[str, Any]],
    max_tokens: int,
    max_rounds: int,
    deadline: float,
    model_timeout: float,
    result: LoopResult | None = None,
    cache: CachePolicy = CachePolicy(),
    stable_blocks: int | None = None,
    memory_index: int | None = None,
    summary_index: int | None = None,
    events: TurnEvents | None = None,
    guard: SpendGuard | None = None,
    prior: Sequence[Mapping[str, object]] = (),
) -> LoopResult:
    """Runs until the model stops asking for tools. `result` is filled as it goes, so a caller
    that catches a failure still knows the tokens already spent. The last of `messages` is the
    turn's own; `stable_blocks` of its blocks are the user's (engine.cache places the markers).
    `guard` (spending limits, TL10) is asked before each model call and each answer's tools."""
    out = result if result is not None else LoopResult()
    tools = offered_tools(registry, ctx, getattr(provider, "name", ""))
    convo = list(messages)
    turn_start = len(convo) - 1
    convo += [dict(m) for m in prior]  # a resumed turn (engine.approval): its messages so far, the decided results last
    paused: dict[str, Any] | None = None  # an answer a server tool paused (pause_turn), continued next round
    last_cost = 0.0
    for round_no in range(max_rounds):
        if guard is not None:
            guard.before_call(out.usage.cost_usd, last_cost)
        remaining = deadline - time.monotonic()
        if remaining < _MIN_CALL_SECONDS:
            raise TurnTimeout("the turn ran out of time before the model finished")
        # The last allowed round may not call tools, so the turn always ends in text.
        last_round = round_no == max_rounds - 1
        marked_system, marked, _ = mark(
            model,
            tools,
            system,
            convo,
            turn_start=turn_start,
            stable_blocks=stable_blocks,
            policy=cache,
            memory_index=memory_index,
            summary_index=summary_index,
        )
        # Only a watched turn streams: the unwatched one calls the provider as it always did.
        on_text = None if events is None else events.text
        with timeline.model_call(
            trace_of(ctx.state), model=model, provider=getattr(provider, "name", ""), max_tokens=max_tokens, on_text=on_text
        ) as call:
            response = provider.complete(
                model=model,
                system=marked_system,
                tools=tools,
                messages=[for_model(m) for m in marked],
                max_tokens=max_tokens,
                timeout=min(model_timeout, remaining),
                tool_choice={"type": "none"} if (last_round and tools) else None,
                **call.streaming,
            )
        if events is not None:
            events.next_round()
        usage = usage_of(response)
        call.answered(response, usage)
        last_cost = usage.cost_usd
        out.usage_by_model[response.model] = out.usage_by_model.get(response.model, Usage()) + usage

        content = list(response.content)
        if response.stop_reason == "pause_turn":
            # A server tool (web search, web fetch) is still working: hand its partial answer back
            # as it came, and the API goes on from there in the next round.
            if paused is None:
                paused = {"role": "assistant", "content": []}
                convo.append(paused)
                out.new_messages.append(paused)
            paused["content"] = [*paused["content"], *content]
            continue
        wants_tools = response.stop_reason == "tool_use"
        if not wants_tools:
            # A tool call cut off (e.g. at max_tokens) would be stored without its result and
            # poison every later request; keep only the complete part of the answer.
            content = [b for b in content if b.get("type") != "tool_use"]
        # The API rejects empty text blocks, so they are dropped; an empty answer becomes a note.
        content = [b for b in content if b.get("type") != "text" or b.get("text")]
        if not content:
            content = [{"type": "text", "text": "(no reply)"}]
        if paused is not None:  # the answer goes on the paused one: one assistant message, as the API expects
            paused["content"] = [*paused["content"], *content]
            assistant, paused = paused, None
        else:
            assistant = {"role": "assistant", "content": content}
            convo.append(assistant)
            out.new_messages.append(assistant)
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        uses = [b for b in content if b.get("type") == "tool_use"]
        if texts:
            out.reply = "\n".join(t for t in texts if t)
        if not wants_tools or not uses:
            return out

        if guard is not None:
            guard.before_tools(len(out.tool_calls), len(uses))
        held = held_uses(ctx, uses)  # TL10: these wait for the owner; the others run now
        results = _call_tools([u for u in uses if u not in held], registry, ctx, deadline, out, events)
        if held:
            out.pending, out.obtained = held, results
            return out
        tool_message = {"role": "user", "content": results}
        convo.append(tool_message)
        out.new_messages.append(tool_message)
    # Only reachable if the model ignored tool_choice=none: close the turn with valid history.
    note = "I stopped here: this turn reached its limit of tool rounds."
    out.new_messages.append({"role": "assistant", "content": [{"type": "text", "text": note}]})
    out.reply = note
    return out
