"""Closing the sockets of a revoked API key or a deleted account (MX6): their rows go, then
API Gateway's management API closes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.streaming.ports import Pusher, Streams


def close_all(pusher: Pusher, connection_ids: list[str]) -> None:
    """Closes sockets whose rows are already gone (a revoked key's, a deleted account's) (MX6)."""
    for connection_id in connection_ids:
        pusher.disconnect(connection_id)


def close_opened_with(streams: Streams, pusher: Pusher, tenant: str, key_id: str) -> None:
    """A revoked key's sockets: forgotten, then closed."""
    opened = streams.opened_with(tenant, key_id)
    for connection_id in opened:
        streams.close(connection_id)
    close_all(pusher, opened)
