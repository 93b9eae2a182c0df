"""Tickets that open a WebSocket (ST2): the JWT stays in the Authorization header of one HTTP
call, and the socket's URL carries only a random one-time ticket that lives a minute."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.kernel.settings import Settings
    from engram.streaming.ports import Streams


def issue_ticket(streams: Streams, settings: Settings, tenant: str, key_id: str = "") -> dict[str, object]:
    """A ticket that opens one socket as `t` within STREAM_TICKET_TTL_SECONDS, and where to open
    it; a socket opened with a ticket issued to an API key closes when the key is revoked."""
    ticket = secrets.token_urlsafe(24)
    expires = streams.put_ticket(tenant, ticket, settings.stream_ticket_ttl_s, key_id=key_id)
    return {"ticket": ticket, "expiresAt": expires, "url": settings.stream_url}
