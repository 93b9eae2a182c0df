"""Tickets, connections and subscriptions of the WebSocket API (keys: aws.keys, "the WebSocket API").

Every row carries `expiresAt` (the table's TTL attribute) and readers skip a row past it, since
DynamoDB deletes expired items only eventually: a ticket lives a minute, a connection and its
subscriptions as long as API Gateway keeps a socket open (2 hours)."""

from __future__ import annotations

import time

from engram.aws import keys
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import NotFound, QuotaExceeded
from engram.streaming.ports import ResumePoint

_LIVE = "expiresAt > :now"
_KEY = "keyId"  # the API key a ticket was issued to, a socket opened with (MX6: revoking it closes the socket)
MAX_SUBSCRIPTIONS = 20  # sessions one socket may watch
MAX_SEQ = 999_999


class StreamRepository:
    def __init__(self, table: Table):
        self.table = table

    # --- tickets ----------------------------------------------------------------------------------
    def put_ticket(self, tenant: str, ticket: str, ttl_s: int, *, key_id: str = "") -> int:
        expires = int(time.time()) + ttl_s
        row = {"PK": keys.stream_ticket_pk(ticket), "SK": keys.STREAM_TICKET_SK, "tenant": tenant, "expiresAt": expires}
        self.table.put({**row, **({_KEY: key_id} if key_id else {})}, condition="attribute_not_exists(PK)")
        return expires

    def take_ticket(self, ticket: str) -> tuple[str, str] | None:
        """The ticket's tenant and the API key it was issued to ("" for a sign-in), deleted in the same call (a conditional delete: a ticket opens
        one socket, once, before it expires); None for one unknown, taken or expired."""
        try:
            old = self.table.delete(
                keys.stream_ticket_pk(ticket),
                keys.STREAM_TICKET_SK,
                condition=f"attribute_exists(PK) AND {_LIVE}",
                values={":now": int(time.time())},
                returning=True,
            )
        except ConditionFailed:
            return None
        return (str(old["tenant"]), str(old.get(_KEY) or "")) if old else None

    # --- connections ----------------------------------------------------------------------------
    def open(self, tenant: str, connection_id: str, *, ttl_s: int, limit: int, key_id: str = "") -> None:
        """Records an open socket of `t` (opened with the API key `key_id`, if any), within `limit`
        live sockets per user."""
        now = int(time.time())
        rows = self.table.query_all(keys.tenant_pk(tenant), sk_prefix="STREAMCONN#")
        if sum(1 for r in rows if int(r.get("expiresAt", 0)) > now) >= limit:
            raise QuotaExceeded("stream connections", limit, setting="MAX_STREAM_CONNECTIONS", remedy="close one to make room")
        expires = now + ttl_s
        by_key = {_KEY: key_id} if key_id else {}
        self.table.transact(
            [
                self.table.put_op(
                    {
                        "PK": keys.stream_connection_pk(connection_id),
                        "SK": keys.STREAM_CONNECTION_SK,
                        "tenant": tenant,
                        "expiresAt": expires,
                        **by_key,
                    }
                ),
                self.table.put_op(
                    {
                        "PK": keys.tenant_pk(tenant),
                        "SK": keys.stream_connection_sk(connection_id),
                        "expiresAt": expires,
                        **by_key,
                    }
                ),
            ]
        )

    def connection(self, connection_id: str) -> tuple[str, set[str], str] | None:
        """An open socket's tenant, the sessions it watches ("agentId/sessionId") and the API key
        it was opened with (""); None once closed."""
        row = self.table.get(keys.stream_connection_pk(connection_id), keys.STREAM_CONNECTION_SK)
        if not row or int(row.get("expiresAt", 0)) <= time.time():
            return None
        return str(row["tenant"]), {str(w) for w in row.get("watching") or ()}, str(row.get(_KEY) or "")

    def opened_with(self, tenant: str, key_id: str) -> list[str]:
        """The connections of `tenant` opened with the API key `key_id`."""
        rows = self.table.query_all(keys.tenant_pk(tenant), sk_prefix="STREAMCONN#")
        return [str(r["SK"]).removeprefix("STREAMCONN#") for r in rows if r.get(_KEY) == key_id]

    def close(self, connection_id: str) -> None:
        """Forgets a socket and its subscriptions (at $disconnect, or when a post finds it gone)."""
        row = self.table.delete(keys.stream_connection_pk(connection_id), keys.STREAM_CONNECTION_SK, returning=True)
        if not row:
            return
        tenant = str(row["tenant"])
        deletes = [(keys.tenant_pk(tenant), keys.stream_connection_sk(connection_id))]
        for watched in row.get("watching") or ():
            agent_id, _, session_id = str(watched).partition("/")
            deletes.append((keys.agent_pk(tenant, agent_id), keys.stream_subscription_sk(session_id, connection_id)))
        self.table.batch_write(deletes=deletes)

    def delete_all(self, tenant: str) -> list[str]:
        """A deleted account's sockets and sent turns (its subscriptions go with its agents); the
        ids of the sockets, for the caller to close."""
        pk = keys.tenant_pk(tenant)
        closed = []
        for row in self.table.query_all(pk, sk_prefix="STREAMCONN#"):
            connection_id = str(row["SK"]).removeprefix("STREAMCONN#")
            self.table.delete(keys.stream_connection_pk(connection_id), keys.STREAM_CONNECTION_SK)
            closed.append(connection_id)
        self.table.delete_all(pk, sk_prefix="STREAMCONN#")
        self.table.delete_all(pk, sk_prefix="STREAMTURN#")
        self.table.delete_all(pk, sk_prefix="STREAMEVENT#")
        return closed

    # --- subscriptions --------------------------------------------------------------------------
    def subscribe(
        self, tenant: str, connection_id: str, agent_id: str, session_id: str, ttl_s: int, *, resumed: ResumePoint | None = None
    ) -> None:
        """The socket watches the session until it closes (or the row expires); an unknown agent
        or session is a 404, a socket watching too many sessions a 409. `resumed`: the run and seq
        a `resume` subscribed it after (it has that run's events up to there: none is posted to it)."""
        now = int(time.time())
        watched = f"{agent_id}/{session_id}"
        try:
            self.table.transact(
                [
                    self.table.check_op(keys.agent_pk(tenant, agent_id), keys.session_sk(session_id)),
                    self.table.update_op(
                        keys.stream_connection_pk(connection_id),
                        keys.STREAM_CONNECTION_SK,
                        "ADD watching :w",
                        condition="attribute_exists(PK) AND (attribute_not_exists(watching) OR contains(watching, :one) OR size(watching) < :most)",
                        values={":w": {watched}, ":one": watched, ":most": MAX_SUBSCRIPTIONS},
                    ),
                    self.table.put_op(
                        {
                            "PK": keys.agent_pk(tenant, agent_id),
                            "SK": keys.stream_subscription_sk(session_id, connection_id),
                            "connectionId": connection_id,
                            "expiresAt": now + ttl_s,
                            **({"resumedRun": resumed[0], "resumedAfter": resumed[1]} if resumed else {}),
                        }
                    ),
                ]
            )
        except ConditionFailed as err:
            if err.failed_at(0):
                raise NotFound("session not found", field="sessionId") from None
            raise QuotaExceeded("watched sessions", MAX_SUBSCRIPTIONS, per="connection", remedy="unsubscribe one") from None

    def unsubscribe(self, tenant: str, connection_id: str, agent_id: str, session_id: str) -> None:
        self.table.delete(keys.agent_pk(tenant, agent_id), keys.stream_subscription_sk(session_id, connection_id))
        try:
            self.table.update(
                keys.stream_connection_pk(connection_id),
                keys.STREAM_CONNECTION_SK,
                "DELETE watching :w",
                condition="attribute_exists(PK)",
                values={":w": {f"{agent_id}/{session_id}"}},
            )
        except ConditionFailed:
            pass

    def subscribers(self, tenant: str, agent_id: str, session_id: str) -> list[str]:
        """The live sockets watching a session (one Query)."""
        return list(self.watching(tenant, agent_id, session_id))

    def watching(self, tenant: str, agent_id: str, session_id: str) -> dict[str, ResumePoint | None]:
        """The live sockets watching a session, each with the point a `resume` subscribed it after
        (None for a plain subscription); one Query."""
        now = time.time()
        rows = self.table.query_all(keys.agent_pk(tenant, agent_id), sk_prefix=keys.stream_subscription_prefix(session_id))
        return {
            str(r["connectionId"]): (str(r["resumedRun"]), int(r["resumedAfter"])) if "resumedRun" in r else None
            for r in rows
            if int(r.get("expiresAt", 0)) > now
        }

    # --- a turn's kept events (ST5) ---------------------------------------------------------------
    def keep_event(self, tenant: str, run_id: str, seq: int, data: str, ttl_s: int) -> None:
        """Keeps one event (its JSON as sent) for `ttl_s`, for a socket that resumes."""
        self.table.put(
            {
                "PK": keys.tenant_pk(tenant),
                "SK": keys.stream_event_sk(run_id, seq),
                "data": data,
                "expiresAt": int(time.time()) + ttl_s,
            }
        )

    def events_after(self, tenant: str, run_id: str, after_seq: int) -> list[str]:
        """The kept events of a run after `after_seq`, in order (their JSON as sent)."""
        now = time.time()
        rows = self.table.query_all(
            keys.tenant_pk(tenant),
            sk_after=keys.stream_event_sk(run_id, after_seq + 1),
            sk_before=keys.stream_event_sk(run_id, MAX_SEQ),
        )
        return [str(r["data"]) for r in rows if int(r.get("expiresAt", 0)) > now]
