"""Run records in the tenant's partition: listed per agent through GSI1 (time-ordered ids), a
re-examination's children through a sparse GSI2 key; and the one transaction that ends a turn."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from itertools import takewhile
from typing import Any

from engram.aws import keys
from engram.aws.items import deserialize, encode_token, serialize
from engram.aws.table import Cancelled, ConditionFailed, IdempotencyMismatch, Table, backoff
from engram.kernel.errors import Conflict, NotFound, OutcomeUnknown, SessionBusy, StorageUnavailable, aws_unavailable
from engram.kernel.model import now_iso
from engram.kernel.observability import logger
from engram.runs.models import Run, approvals_stale_at, epoch_of
from engram.runs.ports import SessionCommits
from engram.runs.traces import TraceRepository
from engram.usage.models import UsageRow
from engram.usage.repository import UsageRepository

_TRANSACTION_ITEMS = 90  # TransactWriteItems takes at most 100 items
# Routine runs expire (RUN_RETENTION_DAYS): scheduled heartbeats and chat turns, unless they
# produced a card. Manual runs, re-examinations and council members were asked for; they stay.
ROUTINE_KINDS = frozenset({"heartbeat", "chat"})


def has_card(run: Run) -> bool:
    return isinstance(run.result, dict) and isinstance(run.result.get("card"), dict)


def retention_expiry(run: Run, retention_days: int) -> int | None:
    """The run record's DynamoDB TTL (epoch seconds, counted from its creation), or None to keep it."""
    if retention_days <= 0 or run.kind not in ROUTINE_KINDS or has_card(run):
        return None
    return epoch_of(run.created_at) + retention_days * 86400


def _now() -> int:
    """The clock of claims and stale times (epoch seconds); tests replace it."""
    return int(time.time())


STALE_ERROR = {
    "code": "stale",
    "message": "the run did not finish within its budget and grace; nothing more will happen to it, start it again",
}


class RunRepository:
    def __init__(
        self,
        table: Table,
        sessions: SessionCommits,
        usage: UsageRepository | None = None,
        *,
        retention_days: int = 0,
        stale_after_s: tuple[float, float] = (1000.0, 1500.0),
    ):
        self.table = table
        self.retention_days = retention_days
        # How long a queued or running record may stay so before the sweeper fails it: a chat
        # turn's, and any other run's (its budget, a council's two rounds, and a grace for queues).
        self.stale_after_s = stale_after_s
        self.sessions = sessions
        self.usage = usage or UsageRepository(table)
        self.traces = TraceRepository(table, lambda run: retention_expiry(run, retention_days))  # OB1: run timelines

    def item(self, tenant: str, run: Run) -> dict[str, object]:
        item = {
            "PK": keys.tenant_pk(tenant),
            "SK": keys.run_sk(run.id),
            "GSI1PK": keys.runs_by_agent(tenant, run.agent_id),
            "GSI1SK": run.id,
            **run.model_dump(by_alias=True, mode="json", exclude={"latest_conviction", "resolution_status"}),
        }
        # Set by their own updates (re-examinations finishing, PATCH): a run's rewrite keeps them.
        for attr, value in (("latestConviction", run.latest_conviction), ("resolutionStatus", run.resolution_status)):
            if value is not None:
                item[attr] = value
        # Every write of a run is the whole record: a run that ends with a card loses its expiry.
        expires_at = retention_expiry(run, self.retention_days)
        if expires_at is not None:
            item["expiresAt"] = expires_at
        if run.status in ("queued", "running"):
            item.update(self._open(run.id, epoch_of(run.updated_at) + self.stale_after(run.kind)))
        elif run.status == "awaiting_approval":  # TL10: the turn kept; the sweeper looks again at its first expiry
            item.update(self._open(run.id, approvals_stale_at(run.pending_approvals, now=_now())), paused=run.paused)
        if run.kind == "reexamination" and run.parent_run_id:
            # Sparse: GET /api/runs/{parent}/re-examinations is one Query, in creation order.
            item["GSI2PK"] = keys.reexaminations_of(tenant, run.parent_run_id)
            item["GSI2SK"] = f"{run.created_at}#{run.id}"
        return item

    def stale_after(self, kind: str) -> int:
        chat, other = self.stale_after_s
        return int(chat if kind == "chat" else other)

    @staticmethod
    def _open(run_id: str, stale_at: int) -> dict[str, str]:
        """The sparse GSI3 keys of an unfinished run: its shard, and the time it becomes stale.
        A finished run's record is written without them (or they are removed)."""
        return {"GSI3PK": keys.open_runs(run_id), "GSI3SK": f"{stale_at:012d}#{run_id}"}

    def create(self, tenant: str, run: Run) -> bool:
        """Records a queued run; False if a run with this id already exists (a redelivered firing)."""
        try:
            self.table.put(self.item(tenant, run), condition="attribute_not_exists(PK)")
        except ConditionFailed:
            return False
        return True

    def fail_unfinished(self, tenant: str, run: Run) -> bool:
        """Records `run` (failed, with its error) unless its record says it finished: a queued or
        running record is marked failed, a missing one is created as `run`. False: it had finished
        (succeeded, or failed with its own error), so nothing changed."""
        try:
            self._mark_failed(tenant, run.id, run.error, run.updated_at)
        except ConditionFailed:
            return self.create(tenant, run)  # no record yet (the firing failed before it wrote one), or finished
        return True

    def _mark_failed(
        self, tenant: str, run_id: str, error: object, at: str, *, also: str = "", values: Mapping[str, object] | None = None
    ) -> None:
        """A queued or running record becomes failed with `error` (and leaves the open-run index);
        ConditionFailed when it is not unfinished (or `also`, a further condition, fails)."""
        self.table.update(
            keys.tenant_pk(tenant),
            keys.run_sk(run_id),
            "SET #s = :failed, #e = :error, updatedAt = :at, finishedAt = :at REMOVE claimedUntil, GSI3PK, GSI3SK",
            condition="#s IN (:queued, :running)" + (f" AND {also}" if also else ""),
            names={"#s": "status", "#e": "error"},
            values={
                ":failed": "failed",
                ":error": error,
                ":at": at,
                ":queued": "queued",
                ":running": "running",
                **(values or {}),
            },
        )

    def put(self, tenant: str, run: Run, *, only_if_new: bool = False) -> None:
        try:
            self.table.put(self.item(tenant, run), condition="attribute_not_exists(PK)" if only_if_new else None)
        except ConditionFailed:
            pass  # only_if_new: it is there already

    def get(self, tenant: str, run_id: str) -> Run | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.run_sk(run_id))
        return Run.model_validate(item) if item else None

    def page(self, tenant: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Run], str | None]:
        items, nxt = self.table.query(
            keys.runs_by_agent(tenant, agent_id), index="GSI1", limit=limit, token=token, newest_first=True
        )
        return [Run.model_validate(i) for i in items], nxt

    def newest(self, tenant: str, *, agent_id: str | None, before: str | None, max_items: int) -> list[Run]:
        """Up to `max_items` runs, newest first, older than the run `before` (ids are time-ordered):
        one agent's through GSI1, or the tenant's, all agents, from its partition's RUN# rows (the
        rows sorted before them are not runs: reading stops at the first)."""
        if agent_id:
            pk = keys.runs_by_agent(tenant, agent_id)
            items = self.table.query_all(pk, index="GSI1", sk_before=before, newest_first=True, max_items=max_items)
        else:
            below = keys.run_sk(before) if before else "RUN$"  # "$" sorts right after "#"
            rows = self.table.query_all(keys.tenant_pk(tenant), sk_before=below, newest_first=True, max_items=max_items)
            items = list(takewhile(lambda i: str(i["SK"]).startswith("RUN#"), rows))
        return [Run.model_validate(i) for i in items]

    def delete_all(self, tenant: str) -> int:
        """Every run row of the tenant (an account deletion; agent deletion removes its own)."""
        self.table.delete_all(keys.tenant_pk(tenant), sk_prefix=keys.ACTIVE_TURN_PREFIX)
        return self.table.delete_all(keys.tenant_pk(tenant), sk_prefix="RUN#")

    def start(self, tenant: str, run_id: str, *, claim_s: float, waiting: bool = False) -> Run | None:
        """Claims a queued run for one worker (status running, a claim that expires after `claim_s`,
        so a crashed worker's run can be taken again). None: finished, or another worker has it.
        `waiting`: claims the resumption of a run whose approvals are decided (TL10) instead, once:
        a redelivered resume job finds it claimed, so an approved tool runs at most once."""
        now = _now()
        until = now + int(claim_s) + 1
        open_keys = self._open(run_id, max(until, now + self.stale_after("run")))
        try:
            item = self.table.update(
                keys.tenant_pk(tenant),
                keys.run_sk(run_id),
                "SET #s = :running, claimedUntil = :until, updatedAt = :at, GSI3PK = :open, GSI3SK = :stale",
                condition="#s = :awaiting"
                if waiting
                else "attribute_exists(PK) AND (#s = :queued OR (#s = :running AND claimedUntil < :now))",
                names={"#s": "status"},
                values={
                    ":running": "running",
                    **({":awaiting": "awaiting_approval"} if waiting else {":queued": "queued", ":now": now}),
                    ":until": until,
                    ":at": now_iso(),
                    ":open": open_keys["GSI3PK"],
                    ":stale": open_keys["GSI3SK"],
                },
            )
        except ConditionFailed:
            return None
        return Run.model_validate(item)

    def requeue(self, tenant: str, run_id: str) -> None:
        """Gives a claimed run back (its session was busy): the retry claims it again."""
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.run_sk(run_id),
                "SET #s = :queued, GSI3SK = :stale REMOVE claimedUntil",
                condition="#s = :running",
                names={"#s": "status"},
                values={
                    ":queued": "queued",
                    ":running": "running",
                    ":stale": self._open(run_id, _now() + self.stale_after("run"))["GSI3SK"],
                },
            )
        except ConditionFailed:
            pass  # finished meanwhile: nothing to give back

    def stale(self, *, now: int | None = None, limit: int = 100) -> list[tuple[str, str, str]]:
        """Unfinished runs past their stale time, across tenants: (tenant, run id, the GSI3 sort
        key seen), at most `limit` per shard (the sweeper runs again)."""
        before = f"{(now if now is not None else _now()):012d}#"
        found: list[tuple[str, str, str]] = []
        for shard in keys.open_runs_shards():
            items = self.table.query_all(shard, index="GSI3", sk_before=before, max_items=limit)
            found += [(i["PK"], i["SK"].removeprefix("RUN#"), i["GSI3SK"]) for i in items]
        return found

    def fail_stale(self, tenant: str, run_id: str, seen: str) -> bool:
        """Marks one stale run failed (`stale`), unless it finished, or was claimed or given back
        since the sweeper saw it (its stale time moved). True when it was marked."""
        try:
            self._mark_failed(tenant, run_id, STALE_ERROR, now_iso(), also="GSI3SK = :seen", values={":seen": seen})
        except ConditionFailed:
            return False
        return True

    def _committed(self, tenant: str, run: Run, usage_rows: list[UsageRow], *, unknown_if_unread: bool = False) -> bool:
        """Whether this very commit is already stored: the run record as we write it and every
        usage row (a retry after a lost response meets its own conditions, or DynamoDB answers
        its token as a different request's). An unreadable table counts as "no" after an answer
        that refused the write; after no answer at all (`unknown_if_unread`) it may have landed:
        OutcomeUnknown, naming the run."""
        expected = deserialize(serialize(self.item(tenant, run)))
        try:
            stored = self.table.get(expected["PK"], expected["SK"])
            rows = [self.usage.item(tenant, row) for row in usage_rows]
            found = self.table.get_many([(r["PK"], r["SK"]) for r in rows])
        except Exception as err:
            if unknown_if_unread:
                raise OutcomeUnknown(run.id) from err
            return False
        return stored == expected and len(found) == len(rows)

    def finish_turn(
        self,
        tenant: str,
        *,
        run: Run,
        usage_rows: list[UsageRow],
        session_changes: Mapping[str, object] | None,
        extra_items: Sequence[Mapping[str, object]] | None = None,
        paused: bool = False,
    ) -> None:
        """Ends a turn in one transaction: the run record, its usage, and the session's lease.
        `paused` (TL10): the turn stops for approvals; the session waits for the run, lease released.

        `session_changes` (successful turns) bumps the revision and counters in the same write;
        a run can only be finished once (a redelivered job cannot double-count).
        `extra_items` (plain attribute dicts with their keys, e.g. the turn's archived messages)
        are Puts of the same transaction, up to 90 items in all (DynamoDB allows 100); any
        overflow is written after the transaction commits, with BatchWriteItem.
        """
        ops: list[dict[str, Any]] = []
        if run.session_id is not None and paused:
            ops.append(self.sessions.pause_op(tenant, run.agent_id, run.session_id, run.id))
        elif run.session_id is not None:
            ops.append(self.sessions.commit_op(tenant, run.agent_id, run.session_id, run.id, session_changes, run.updated_at))
        # A clean-slate run (no session) has no lease: the run record's own status guards it.
        run_index = len(ops)
        ops.append(
            self.table.put_op(
                self.item(tenant, run),
                condition="attribute_not_exists(PK) OR #s IN (:queued, :running)",
                names={"#s": "status"},
                values={":queued": "queued", ":running": "running"},
            )
        )
        ops += [self.table.put_op(self.usage.item(tenant, row)) for row in usage_rows]
        # The totals count once: the run record's condition lets this transaction apply only once.
        ops += self.usage.totals_ops(tenant, usage_rows, kind=run.kind, tool_calls=len(run.tool_calls))
        extra = list(extra_items or [])
        room = max(0, _TRANSACTION_ITEMS - len(ops))
        ops += [self.table.put_op(item) for item in extra[:room]]
        try:
            self.table.transact(ops, token=_commit_token(run))
        except ConditionFailed as err:
            if not self._committed(tenant, run, usage_rows):
                if run.session_id is not None and err.failed_at(0):
                    raise SessionBusy("the session lease was lost before the turn finished", field="sessionId") from None
                if err.failed_at(run_index):
                    raise Conflict("this run has already finished", field="runId", code="run_finished") from None
                raise
        except IdempotencyMismatch:
            # The token was used by another finish of this run with other content.
            if not self._committed(tenant, run, usage_rows):
                raise Conflict("this run has already finished", field="runId", code="run_finished") from None
        except Exception as err:
            # No answer (a lost response, a timeout): the transaction may have been applied.
            if not aws_unavailable(err) or not self._committed(tenant, run, usage_rows, unknown_if_unread=True):
                raise
        overflow = extra[room:]
        if overflow:
            # Only a turn with very many long messages gets here; the turn itself is committed, so
            # these are written best-effort.
            try:
                self.table.batch_write(puts=overflow)
            except Exception:
                logger.exception(
                    "could not write the items that overflowed the turn transaction",
                    extra={"run_id": run.id, "count": len(overflow)},
                )


class RunDecisionRepository:
    """Runs read and annotated as decisions: a run's resolution, the newest re-examination's
    conviction on its parent, a run's re-examinations, and the runs whose result holds a card."""

    def __init__(self, table: Table):
        self.table = table

    def set_resolution(self, tenant: str, run_id: str, status: str) -> Run:
        try:
            item = self.table.set_fields(
                keys.tenant_pk(tenant), keys.run_sk(run_id), {"resolutionStatus": status, "updatedAt": now_iso()}
            )
        except ConditionFailed:
            raise NotFound("run not found", field="runId") from None
        return Run.model_validate(item)

    def set_latest_conviction(
        self, tenant: str, parent_run_id: str, *, score: int, child_run_id: str, child_created_at: str
    ) -> None:
        """The parent run shows its newest re-examination's conviction; its result never changes.
        An older re-examination finishing late does not overwrite a newer one."""
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.run_sk(parent_run_id),
                "SET latestConviction = :score, latestReexaminationId = :child, latestConvictionAt = :at",
                condition="attribute_exists(PK) AND (attribute_not_exists(latestConvictionAt) OR latestConvictionAt <= :at)",
                values={":score": score, ":child": child_run_id, ":at": f"{child_created_at}#{child_run_id}"},
            )
        except ConditionFailed:
            pass  # gone, or a newer re-examination already set it

    def list_reexaminations(
        self, tenant: str, parent_run_id: str, *, limit: int, token: str | None
    ) -> tuple[list[Run], str | None]:
        items, nxt = self.table.query(keys.reexaminations_of(tenant, parent_run_id), index="GSI2", limit=limit, token=token)
        return [Run.model_validate(i) for i in items], nxt

    def recent_with_cards(self, tenant: str, agent_id: str, *, limit: int, page: int = 25, max_pages: int = 4) -> list[Run]:
        """The agent's newest runs whose result holds a card: its runs through GSI1 newest first,
        a bounded number of small pages (at most `page * max_pages` runs are read)."""
        return self.with_cards_page(tenant, agent_id, limit=limit, token=None, page=page, max_pages=max_pages)[0]

    def with_cards_page(
        self, tenant: str, agent_id: str, *, limit: int, token: str | None, page: int = 25, max_pages: int = 4
    ) -> tuple[list[Run], str | None]:
        """One page of `recent_with_cards` and the token of the next: a page may be short (at
        most `page * max_pages` runs are read per call) while the token still continues."""
        found: list[dict[str, Any]] = []
        pk = keys.runs_by_agent(tenant, agent_id)
        for _ in range(max_pages):
            items, token = self.table.query(pk, index="GSI1", limit=page, token=token, newest_first=True)
            for item in items:
                result = item.get("result")
                if item.get("status") == "succeeded" and isinstance(result, dict) and isinstance(result.get("card"), dict):
                    found.append(item)
                    if len(found) > limit:  # one more than the page: a token only when another follows
                        last = {k: found[limit - 1][k] for k in ("PK", "SK", "GSI1PK", "GSI1SK")}
                        return [Run.model_validate(i) for i in found[:limit]], encode_token(serialize(last))
            if not token:
                break
        return [Run.model_validate(i) for i in found], token


def _commit_token(run: Run) -> str:
    """The transaction's idempotency token: one per run and outcome (a failed run's record is a
    different request from its commit), 32 hex characters (DynamoDB allows 36)."""
    return hashlib.sha256(f"{run.id}:{run.status}:{run.updated_at}".encode()).hexdigest()[:32]


# --- a queued turn's admission (ST4, ST7) ---------------------------------------------------------
# PK <t> SK ACTIVETURN#<runId>: a turn queued or running (TTL `expiresAt`); the clientTurnId claim
# (keys.stream_client_turn_sk) names its run. Written with the run in one transaction.
_CLAIM_TRIES = 6  # a clientTurnId's claim colliding with a concurrent one
_CLAIMABLE = "attribute_not_exists(PK) OR expiresAt <= :now"


class TurnAdmissionRepository:
    def __init__(self, table: Table, runs: RunRepository):
        self.table, self.runs = table, runs

    def create_turn(self, tenant: str, run: Run, *, client_turn_id: str | None, ttl_s: int, counted: bool = True) -> Run | None:
        """Records a queued turn in one transaction (ST4, ST7): its run, its row among the tenant's
        active turns (until the worker ends it, or the run would be stale), and the claim of the
        client's id of the turn (scoped to the run's agent and session) when there is one, so a
        concurrent resend either wins all of them or finds the claim and, beside it, the run it
        names. None: written; else the earlier claim's run. A transaction that collides with the
        other one (TransactionConflict) is tried again."""
        pk = keys.tenant_pk(tenant)
        pauses = backoff(0.02, 0.5)
        for attempt in range(_CLAIM_TRIES):
            now = int(time.time())
            ops = [self.table.put_op(self.runs.item(tenant, run), condition="attribute_not_exists(PK)")]
            if counted:  # a queued turn holds a slot of the tenant's cap until the worker ends it (ST7)
                active = {"PK": pk, "SK": keys.active_turn_sk(run.id), "expiresAt": now + self.runs.stale_after(run.kind) + 60}
                ops.append(self.table.put_op(active))
            if client_turn_id:
                claim = {"PK": pk, "SK": self._claim_sk(run, client_turn_id), "runId": run.id, "expiresAt": now + ttl_s}
                ops.insert(0, self.table.put_op(claim, condition=_CLAIMABLE, values={":now": now}))
            try:
                # a lost response's retry (same token) is answered, not refused
                token = f"{run.id}-{attempt}"[-36:]
                try:
                    self.table.transact(ops, token=token)
                except Exception as err:
                    if not aws_unavailable(err):
                        raise
                    self.table.transact(ops, token=token)  # no answer: the same request again tells
                return None
            except ConditionFailed as err:
                if not client_turn_id or not err.failed_at(0):
                    raise
                found = self.claimed(tenant, run, client_turn_id)
                if found is not None:
                    return found
            except Cancelled:
                pass  # the other claimant's transaction was in flight: try again, it decides
            time.sleep(next(pauses))
        raise StorageUnavailable("the turn could not be recorded; send it again with the same clientTurnId")

    @staticmethod
    def _claim_sk(run: Run, client_turn_id: str) -> str:
        return keys.stream_client_turn_sk(run.agent_id, run.session_id or "", client_turn_id)

    def claimed(self, tenant: str, run: Run, client_turn_id: str) -> Run | None:
        """The run a live claim of `client_turn_id` on `run`'s agent and session names; None if
        there is no such claim. A claim whose run is gone is a 409."""
        earlier = self.table.get(keys.tenant_pk(tenant), self._claim_sk(run, client_turn_id))
        if not earlier or int(earlier.get("expiresAt", 0)) <= time.time():
            return None
        found = self.runs.get(tenant, str(earlier["runId"]))
        if found is None:
            raise Conflict(
                "this clientTurnId named a turn whose run is gone; send the turn with a new clientTurnId",
                field="clientTurnId",
            )
        return found

    def active_turns(self, tenant: str) -> int:
        """The tenant's turns queued or running (their rows not yet ended nor expired)."""
        now = time.time()
        rows = self.table.query_all(keys.tenant_pk(tenant), sk_prefix=keys.ACTIVE_TURN_PREFIX)
        return sum(1 for r in rows if int(r.get("expiresAt", 0)) > now)

    def end_turn(self, tenant: str, run_id: str) -> None:
        """The turn no longer counts against the tenant's cap (it ended, or was never queued)."""
        self.table.delete(keys.tenant_pk(tenant), keys.active_turn_sk(run_id))

    def _delete_queued_op(self, tenant: str, run_id: str) -> dict[str, object]:
        op = self.table.delete_op(
            keys.tenant_pk(tenant), keys.run_sk(run_id), condition="#s = :queued", values={":queued": "queued"}
        )
        inner = op["Delete"]
        assert isinstance(inner, dict)
        inner["ExpressionAttributeNames"] = {"#s": "status"}  # status is a reserved word
        return op

    def drop_claim(self, tenant: str, run: Run, *, client_turn_id: str) -> None:
        pk = keys.tenant_pk(tenant)
        claim_sk = keys.stream_client_turn_sk(run.agent_id, run.session_id or "", client_turn_id)
        try:
            self.table.transact(
                [
                    self.table.delete_op(pk, claim_sk, condition="runId = :run", values={":run": run.id}),
                    self._delete_queued_op(tenant, run.id),
                ],
                token=f"drop-{run.id}"[-36:],
            )
        except ConditionFailed:
            pass  # the run started after all, or another send holds the claim: it stands
