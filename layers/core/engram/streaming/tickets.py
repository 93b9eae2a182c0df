"""Tickets that open a WebSocket (ST2): the JWT stays in the Authorization header of one HTTP
call, and the socket's URL carries only a random one-time ticket that lives a minute."""

from __future__ import annotations

import secrets

from engram.wiring.stores import Stores


def issue_ticket(deps: Stores, tenant: str, key_id: str = "") -> dict[str, object]:
    """A ticket that opens one socket as `t` within STREAM_TICKET_TTL_SECONDS, and where to open
    it; a socket opened with a ticket issued to an API key closes when the key is revoked."""
    ticket = secrets.token_urlsafe(24)
    expires = deps.streams.put_ticket(tenant, ticket, deps.settings.stream_ticket_ttl_s, key_id=key_id)
    return {"ticket": ticket, "expiresAt": expires, "url": deps.settings.stream_url}
