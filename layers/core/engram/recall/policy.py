"""Every user message and assistant reply of a session turn joins the conversation archive in the
turn's own commit transaction (no extra AWS call), so trimming the history never loses anything."""

from __future__ import annotations

from engram.engine.tools import ToolContext
from engram.engine.turn import TurnPolicy
from engram.recall.ports import Archive


class ArchivePolicy(TurnPolicy):
    def __init__(self, archive: Archive):
        self.archive = archive

    def commit_items(self, ctx: ToolContext, messages: list[dict[str, object]], at: str) -> list[dict[str, object]]:
        # The assistant's turns carry the agent's name as their speaker (a query naming the agent
        # finds its turns through the speaker field); the product knows no name for the user.
        speakers = {"assistant": ctx.agent.name}
        return self.archive.items_for_turn(ctx.tenant, ctx.agent.id, ctx.session_id, ctx.run_id, messages, at, speakers=speakers)
