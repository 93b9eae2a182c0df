"""Result cards in a turn: the agent's card type (or a run's override) is loaded beside the
transcript, the persona says how to finish, submit_result fills the card, the run's result
carries it; a run whose purpose is its card fails without one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engram.cards.models import CardType
from engram.cards.service import find_card_type
from engram.engine.loop import LoopResult
from engram.engine.tools import ToolContext
from engram.engine.turn import TurnPolicy
from engram.kernel.errors import NoCard
from engram.kernel.fencing import token
from engram.kernel.observability import logger
from engram.kernel.state import StateKey

if TYPE_CHECKING:
    from engram.cards.ports import CardTypes

_REVIEW = (
    "Start every run by calling get_my_decisions: it shows your own last few decisions, so you can stay\n"
    "consistent with them or say why you change your mind."
)
_FINISH = (
    "Finish every run by calling submit_result with a `{name}` card (its fields are in the tool's\n"
    "input schema). If it answers with problems, fix them and call it again; then reply in one short line."
)


@dataclass
class CardState:
    """This turn's card type (None: the agent has none, or it no longer exists) and the valid card
    submit_result accepted."""

    card_type: CardType | None = None
    card: dict[str, Any] | None = None


# The turn state's key of this turn's card.
CARD_STATE = StateKey[CardState]("cards")


def card_state(ctx: ToolContext) -> CardState:
    return CARD_STATE.setdefault(ctx.state, CardState)


class CardPolicy(TurnPolicy):
    def __init__(self, card_types: CardTypes, *, override: CardType | None = None, required: bool = False):
        self.card_types = card_types
        self.override = override  # a re-examination's card type, whatever the agent's own
        self.required = required

    def prepare(self, ctx: ToolContext) -> None:
        state = card_state(ctx)
        if self.override is not None:
            state.card_type = self.override
        elif ctx.agent.card_type:
            # A custom card type is one GetItem, beside the transcript GET; built-ins cost nothing.
            state.card_type = find_card_type(self.card_types, ctx.tenant, ctx.agent.card_type)
            if state.card_type is None:
                logger.warning(
                    "the agent's card type no longer exists; no submit_result this run", extra={"card_type": ctx.agent.card_type}
                )

    def _name(self, ctx: ToolContext) -> str | None:
        state = card_state(ctx)
        return state.card_type.name if state.card_type is not None else ctx.agent.card_type

    def persona(self, ctx: ToolContext) -> list[str]:
        lines = [_REVIEW] if ctx.agent.review_decisions else []
        name = self._name(ctx)
        if name:
            lines.append(_FINISH.format(name=token(name)))
        return lines

    def finish(self, ctx: ToolContext, loop: LoopResult, result: dict[str, object]) -> None:
        state = card_state(ctx)
        if self.required and state.card is None:
            raise NoCard(
                "the run ended without a valid result card (submit_result was not accepted)", field="card", code="no_card"
            )
        name = self._name(ctx)
        if name:
            result.update(card=state.card, cardType=name)
