"""Closing the sockets of a revoked API key or a deleted account (MX6): their rows go, then
API Gateway's management API closes them."""

from __future__ import annotations

from engram.wiring.stores import Stores


def close_all(deps: Stores, connection_ids: list[str]) -> None:
    """Closes sockets whose rows are already gone (a revoked key's, a deleted account's) (MX6)."""
    for connection_id in connection_ids:
        deps.pusher.disconnect(connection_id)


def close_opened_with(deps: Stores, tenant: str, key_id: str) -> None:
    """A revoked key's sockets: forgotten, then closed."""
    opened = deps.streams.opened_with(tenant, key_id)
    for connection_id in opened:
        deps.streams.close(connection_id)
    close_all(deps, opened)
