"""Which tool calls wait for their owner's approval (TL10), as the agent's rules say.

An agent names its own registry tools in `requireApproval` (memory_store, remember, ...); a tool
grant names its connection's tools by the server's names, or `true` for all of them. The MCP tools
are offered as `mcp__<connection>__<tool>`, so a tool set that knows which connection and which
server tool a name stands for says so (`GrantedTools`); the rules are read from the agent record
the turn holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from engram.engine.tools import ToolContext


@runtime_checkable
class GrantedTools(Protocol):
    def granted(self, name: str) -> tuple[str, str] | None:
        """(connection id, the server's tool name) of one of this set's tools; None when not its."""
        ...


def needs_approval(ctx: ToolContext, name: str) -> bool:
    agent = ctx.agent
    if name in agent.require_approval:
        return True
    for toolset in ctx.toolsets:
        found = toolset.granted(name) if isinstance(toolset, GrantedTools) else None
        if found is None:
            continue
        connection_id, tool = found
        for grant in agent.tools:
            if grant.connection_id == connection_id:
                rule = grant.require_approval
                return rule is True or (isinstance(rule, list) and tool in rule)
    return False


def held_uses[U: Mapping[str, object]](ctx: ToolContext, uses: list[U]) -> list[U]:
    """The answer's tool uses that need the owner's approval before they run."""
    return [use for use in uses if needs_approval(ctx, str(use.get("name", "")))]
