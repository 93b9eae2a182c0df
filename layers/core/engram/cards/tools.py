"""Decision tools: `submit_result` (agents with a cardType end a run with a validated card) and
`get_my_decisions` (agents with reviewDecisions read their last ~5 cards as compact entries)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from engram.cards import service as cards
from engram.cards.policy import card_state
from engram.engine.tools import Tool, ToolContext, ToolOutcome, ToolRegistry
from engram.wiring.stores import stores_of

SUBMIT_RESULT = "submit_result"
GET_MY_DECISIONS = "get_my_decisions"
DECISIONS_SHOWN = 5


class _CardInput(BaseModel):
    """Any object: the card is checked against the agent's card type by the handler, so every
    problem is reported at once in the card type's own words."""

    model_config = ConfigDict(extra="allow")


def _submit(ctx: ToolContext, card: _CardInput) -> object:
    state = card_state(ctx)
    card_type = state.card_type
    assert card_type is not None  # the tool is only offered with a card type
    raw = card.model_dump()
    problems = cards.card_problems(card_type, raw)
    if problems:
        return ToolOutcome(
            f"the {card_type.name} card is invalid; fix these and call submit_result again: " + "; ".join(problems),
            is_error=True,
        )
    state.card = cards.clean_card(card_type, raw)
    return {"accepted": True, "cardType": card_type.name, "card": state.card}


def _submit_schema(ctx: ToolContext) -> dict[str, object]:
    card_type = card_state(ctx).card_type
    assert card_type is not None  # the tool is only offered with a card type
    return cards.input_schema(card_type)


class _NoInput(BaseModel):
    pass


def _my_decisions(ctx: ToolContext, _inp: _NoInput) -> object:
    stores = stores_of(ctx)
    found = cards.recent_decisions(stores.card_types, stores.run_decisions, ctx.tenant, ctx.agent.id, limit=DECISIONS_SHOWN)
    if not found:
        return {"decisions": [], "note": "no earlier decisions yet"}
    return {"decisions": [d.entry for d in found]}


def register_tools(registry: ToolRegistry) -> None:
    registry.register(
        Tool(
            SUBMIT_RESULT,
            "Submit this run's result card. Call it once at the end of the run with every required field; "
            "if it answers with problems, fix them and call it again.",
            _CardInput,
            _submit,
            enabled=lambda ctx: card_state(ctx).card_type is not None,
            schema_for=_submit_schema,
        )
    )
    registry.register(
        Tool(
            GET_MY_DECISIONS,
            "Your own last few decision cards, newest first, as compact entries (age · decision · summary). "
            "Call it first in every run to stay consistent with what you decided before.",
            _NoInput,
            _my_decisions,
            enabled=lambda ctx: ctx.agent.review_decisions,
        )
    )
