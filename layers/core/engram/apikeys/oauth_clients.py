"""OAuth clients registered by RFC 7591 dynamic client registration onto Cognito app clients (MX4).

One row per registered client in one partition, `OAUTHCLIENTS` / `CLIENT#<client id>`: its name,
redirect URIs, when it was made and, until the client's first token is seen, `unusedUntil`. The
authorizer accepts a Cognito access token whose `client_id` has a row here (besides the stack's
own clients, AUTH_AUDIENCE) and clears `unusedUntil` on that first use. The sweeper
(`sweep_unused`, with the stale-run sweep every 5 minutes) deletes the row and then the Cognito
app client of a registration whose `unusedUntil` has passed. Registrations per source address and
hour are counted in TTL'd rows `DCRRATE#<ip>` / `h#<hour>` (as the authorizer counts failures).
"""

from __future__ import annotations

import time
from typing import Any

from engram.aws import clients as aws_clients
from engram.aws.clients import make_client
from engram.aws.table import ConditionFailed, Table
from engram.kernel.observability import logger

PARTITION = "OAUTHCLIENTS"
_PREFIX = "CLIENT#"


def _now() -> int:
    return int(time.time())


def _rate_pk(source: str) -> str:
    return f"DCRRATE#{source[:64]}"


class OAuthClients:
    def __init__(self, table: Table):
        self.table = table

    def count(self) -> int:
        return self.table.count(PARTITION, sk_prefix=_PREFIX)

    def take_registration_slot(self, source: str, per_hour: int, *, now: int | None = None) -> bool:
        """One more registration from `source` this hour, unless it has made `per_hour` already."""
        hour = (now if now is not None else _now()) // 3600
        try:
            self.table.update(
                _rate_pk(source),
                f"h#{hour}",
                "ADD #n :one SET #e = :expires",
                condition="attribute_not_exists(#n) OR #n < :limit",
                names={"#n": "n", "#e": "expiresAt"},
                values={":one": 1, ":expires": (hour + 2) * 3600, ":limit": per_hour},
                returns="NONE",
            )
        except ConditionFailed:
            return False
        return True

    def record(self, client_id: str, *, name: str, redirect_uris: list[str], issued_at: int, unused_for: int) -> None:
        self.table.put(
            {
                "PK": PARTITION,
                "SK": _PREFIX + client_id,
                "clientName": name,
                "redirectUris": redirect_uris,
                "issuedAt": issued_at,
                "unusedUntil": issued_at + unused_for,
            }
        )

    def registered(self, client_id: str) -> bool:
        """Whether `client_id` is a registered client; notes its first use (it no longer expires).
        A registration unused past its `unusedUntil` is not (the sweeper deletes it)."""
        if not client_id or len(client_id) > 128:
            return False
        item = self.table.get(PARTITION, _PREFIX + client_id)
        if item is None:
            return False
        if "unusedUntil" in item:
            now = _now()
            if int(item["unusedUntil"]) <= now:
                return False
            try:
                self.table.update(
                    PARTITION,
                    _PREFIX + client_id,
                    "SET #u = :now REMOVE #x",
                    condition="#x > :now",
                    names={"#u": "usedAt", "#x": "unusedUntil"},
                    values={":now": now},
                    returns="NONE",
                )
            except ConditionFailed:  # another request noted it (kept), or it expired or was swept meanwhile
                again = self.table.get(PARTITION, _PREFIX + client_id)
                return again is not None and "unusedUntil" not in again
        return True

    def unused_past(self, now: int) -> list[str]:
        rows = self.table.query_all(PARTITION, sk_prefix=_PREFIX, max_items=5000)
        return [str(r["SK"])[len(_PREFIX) :] for r in rows if "unusedUntil" in r and int(r["unusedUntil"]) <= now]

    def forget_unused(self, client_id: str, now: int) -> bool:
        """Deletes the row if it is still unused past its time (False: it was used meanwhile)."""
        try:
            self.table.delete(
                PARTITION,
                _PREFIX + client_id,
                condition="#x <= :now",
                names={"#x": "unusedUntil"},
                values={":now": now},
            )
        except ConditionFailed:
            return False
        return True


def sweep_unused(clients: OAuthClients, cognito: Any, user_pool_id: str, *, now: int | None = None) -> list[str]:
    """Deletes the registrations never used before their `unusedUntil` and their Cognito app
    clients (the row first, conditionally, so a client that signed in meanwhile is kept).
    Returns the client ids deleted."""
    at = now if now is not None else _now()
    gone: list[str] = []
    for client_id in clients.unused_past(at):
        if not clients.forget_unused(client_id, at):
            continue
        try:
            cognito.delete_user_pool_client(UserPoolId=user_pool_id, ClientId=client_id)
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            # already gone: what the sweep wants
        gone.append(client_id)
    if gone:
        logger.info("unused OAuth clients deleted", extra={"count": len(gone)})
    return gone


def sweep_registrations(clients: OAuthClients | None, user_pool_id: str) -> int:
    """The sweeper's pass over registrations (with the stale-run sweep): how many were deleted.
    A failure is logged, not raised: the next sweep, 5 minutes on, tries again."""
    if clients is None or not user_pool_id:
        return 0
    try:
        return len(sweep_unused(clients, make_client("cognito-idp"), user_pool_id))
    except Exception:
        logger.exception("unused OAuth clients not swept")
        return 0
