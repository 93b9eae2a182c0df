"""Every user message and assistant reply of a session turn joins the conversation archive in the
turn's own commit transaction (no extra AWS call), so trimming the history never loses anything."""

from __future__ import annotations

from engram.engine.tools import TURN_MESSAGE, ToolContext
from engram.engine.turn import TurnPolicy
from engram.facts.ports import Profiles
from engram.facts.service import stated_name
from engram.kernel.state import StateKey
from engram.recall.ports import Archive

PERSON_NAME = StateKey[str]("person_name")
TOKEN_NAME = StateKey[str]("token_name")  # the sign-in token's `name` claim, set by the chat route


class ArchivePolicy(TurnPolicy):
    def __init__(self, archive: Archive, profiles: Profiles | None = None):
        self.archive = archive
        self.profiles = profiles

    def prepare(self, ctx: ToolContext) -> None:
        """The person's name (one GetItem beside the transcript GET); when none is set, the sign-in
        token's `name` claim or a name the message gives ("my name is Caroline") is recorded, and
        names this turn already."""
        if self.profiles is None:
            return
        name = self.profiles.name(ctx.tenant)
        if name is None:
            given = TOKEN_NAME.get(ctx.state) or stated_name(TURN_MESSAGE.get(ctx.state) or "")
            if given is not None and self.profiles.set_name(ctx.tenant, given, only_if_unset=True):
                name = given
        if name:
            PERSON_NAME.put(ctx.state, name)

    def commit_items(self, ctx: ToolContext, messages: list[dict[str, object]], at: str) -> list[dict[str, object]]:
        # Each side's turns carry its name as their speaker (a query naming the agent or the person
        # finds their turns through the speaker field): the agent's, and the person's when known.
        speakers = {"assistant": ctx.agent.name}
        person = PERSON_NAME.get(ctx.state)
        if person:
            speakers["user"] = person
        return self.archive.items_for_turn(ctx.tenant, ctx.agent.id, ctx.session_id, ctx.run_id, messages, at, speakers=speakers)
