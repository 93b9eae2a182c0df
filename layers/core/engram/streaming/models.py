"""What a client sends over the WebSocket API (ST2), as strict bodies (camelCase on the wire)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from engram.kernel.model import Body, Id


class TurnMessage(Body):
    """Runs a turn in the chat function's worker; its events stream to the sockets watching the session."""

    action: Literal["turn"]
    agent_id: Id
    session_id: Id
    message: Annotated[str, StringConstraints(min_length=1)]
    client_turn_id: Id


class SubscribeMessage(Body):
    """Watch (or stop watching) a session: its queued turns, webhook turns and heartbeats."""

    action: Literal["subscribe", "unsubscribe"]
    agent_id: Id
    session_id: Id


class ResumeMessage(Body):
    """The events of a run this socket missed after `afterSeq`, then the rest live (ST5)."""

    action: Literal["resume"]
    run_id: Id
    after_seq: Annotated[int, Field(ge=0, le=1_000_000)] = 0
