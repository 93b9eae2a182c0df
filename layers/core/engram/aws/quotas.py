"""Per-user quotas: a counter item beside the rows it counts, changed in the same transaction as
the create or the delete, so a limit holds under concurrent creates without counting rows.

The counter is `PK = <the rows' partition>, SK = QUOTA#<resource>` with a number `n`. A create
adds `claim_op` (n + k, only while n + k <= limit) to its transaction; a delete adds `release_op`
(n - k, only while n >= k), falling back to the delete alone when the counter cannot give.

Counters can drift: rows stored before counters existed, daily memories removed by TTL, cascades
that batch-delete. The drift is repaired where it matters: a claim that fails counts the rows
once (a consistent COUNT Query) and sets the counter to that count, if no create or delete
touched it meanwhile, then tries again. So a counter that is missing or too high never refuses
wrongly, and one that is too low is corrected as it reaches the limit (rows from before the
counters can exceed the limit by at most what the counter missed, once).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from engram.aws import keys
from engram.aws.table import ConditionFailed, Table
from engram.kernel.errors import QuotaExceeded, Unauthorized

# The row of the credential a request came with (an API key's owner row), which must still exist
# when the request's creates commit (MX6): a create that races a revocation or an account
# deletion fails with the key instead of landing after the key's rows are gone. Set for each
# request by engram.api.http.principal (None for a sign-in token).
_CREDENTIAL: ContextVar[tuple[str, str] | None] = ContextVar("engram_credential_row", default=None)


def require_credential(row: tuple[str, str] | None) -> None:
    """The creates of this request (this context) commit only while `row` exists."""
    _CREDENTIAL.set(row)


def key_revoked() -> Unauthorized:
    return Unauthorized("this API key was revoked, has expired, or its account was deleted", code="key_revoked")


_N = {"#n": "n"}
_TRIES = 3


@dataclass(frozen=True)
class Quota:
    """One counted kind of row of one owner (an account, an agent, a workspace)."""

    resource: str  # how the rows are named in the message and the counter's key: "agents"
    pk: str  # the partition holding the rows and their counter
    rows_prefix: str  # the rows' sort-key prefix
    limit: int = 0  # 0 when only released
    per: str = "account"
    setting: str = ""  # the environment variable that sets the limit
    counted_if: tuple[str, bool] | None = None  # (attribute, present): only such rows count

    @property
    def sk(self) -> str:
        return f"QUOTA#{self.resource}"

    def exceeded(self) -> QuotaExceeded:
        return QuotaExceeded(self.resource, self.limit, per=self.per, setting=self.setting)


def claim_op(table: Table, quota: Quota, by: int = 1) -> dict[str, object]:
    return table.update_op(
        quota.pk,
        quota.sk,
        "ADD #n :by",
        condition="attribute_exists(#n) AND #n <= :most",
        names=_N,
        values={":by": by, ":most": quota.limit - by},
    )


def release_op(table: Table, quota: Quota, by: int = 1) -> dict[str, object]:
    return table.update_op(quota.pk, quota.sk, "ADD #n :less", condition="#n >= :by", names=_N, values={":less": -by, ":by": by})


def recount(table: Table, quota: Quota) -> int | None:
    """Sets the counter to the rows' true count and returns it; None when a create or delete
    changed the counter meanwhile (the next claim decides)."""
    seen = table.get(quota.pk, quota.sk)
    row_filter, names = None, None
    if quota.counted_if:
        attribute, present = quota.counted_if
        row_filter, names = ("attribute_exists(#c)" if present else "attribute_not_exists(#c)"), {"#c": attribute}
    count = table.count(quota.pk, sk_prefix=quota.rows_prefix, row_filter=row_filter, names=names)
    try:
        if seen is None:
            table.put({"PK": quota.pk, "SK": quota.sk, "n": count}, condition="attribute_not_exists(PK)")
        elif seen.get("n") != count:
            table.update(
                quota.pk,
                quota.sk,
                "SET #n = :count",
                condition="#n = :seen",
                names=_N,
                values={":count": count, ":seen": seen.get("n")},
            )
    except ConditionFailed:
        return None
    return count


def room(table: Table, quota: Quota) -> int:
    """How many more rows fit, by a fresh count."""
    for _ in range(_TRIES):
        count = recount(table, quota)
        if count is not None:
            return max(0, quota.limit - count)
    return 0


def create_within(table: Table, ops: list[dict[str, object]], *quotas: Quota) -> None:
    """Commits `ops` (a create) together with a claim of one on each quota, and a check that the
    request's credential row still exists (`require_credential`); QuotaExceeded when a limit is
    reached, Unauthorized key_revoked when the key is gone (nothing written). A failed condition
    of `ops` itself is raised as is."""
    credential = _CREDENTIAL.get()
    guard = [table.check_op(*credential)] if credential else []
    for _ in range(_TRIES):
        try:
            table.transact([*ops, *(claim_op(table, q) for q in quotas), *guard])
            return
        except ConditionFailed as err:
            if guard and err.failed_at(len(ops) + len(quotas)):
                raise key_revoked() from None
            full = [q for i, q in enumerate(quotas) if err.failed_at(len(ops) + i)]
            if not full or any(err.failed_at(i) for i in range(len(ops))):
                raise
        for quota in full:
            count = recount(table, quota)
            if count is not None and count >= quota.limit:
                raise quota.exceeded()
    raise quotas[0].exceeded()


def delete_releasing(table: Table, quota: Quota, ops: list[dict[str, object]], *, by: int = 1) -> None:
    """Commits `ops` (a delete) together with a release of `by` on `quota`; when the counter
    cannot give (missing, or lower than it should be), the delete goes alone."""
    try:
        table.transact([*ops, release_op(table, quota, by)])
    except ConditionFailed as err:
        if not err.failed_at(len(ops)) or any(err.failed_at(i) for i in range(len(ops))):
            raise
        table.transact(ops)


def released(table: Table, quota: Quota, by: int) -> None:
    """After a batch delete (not one transaction): lowers the counter by `by` where it can. A
    crash before this leaves the counter high, which the next claim at the limit repairs."""
    if by <= 0:
        return
    try:
        table.update(quota.pk, quota.sk, "ADD #n :less", condition="#n >= :by", names=_N, values={":less": -by, ":by": by})
    except ConditionFailed:
        pass  # missing or already lower: nothing to give back


def forget(table: Table, quota: Quota) -> None:
    """The owner's rows are all gone: so is the counter."""
    table.delete(quota.pk, quota.sk)


# --- the counted kinds (a limit of 0: a Quota only released, never claimed) --------------------
def agents(tenant: str, limit: int = 0) -> Quota:
    return Quota("agents", keys.tenant_pk(tenant), "AGENT#", limit, setting="MAX_AGENTS")


def scheduled_agents(tenant: str, limit: int = 0) -> Quota:
    return Quota(
        "scheduledAgents", keys.tenant_pk(tenant), "AGENT#", limit, setting="MAX_SCHEDULED_AGENTS", counted_if=("schedule", True)
    )


def card_types(tenant: str, limit: int = 0) -> Quota:
    return Quota("cardTypes", keys.tenant_pk(tenant), "CARDTYPE#", limit, setting="MAX_CARD_TYPES")


def facts(tenant: str, limit: int = 0) -> Quota:
    """Active facts: archiving one (the API's delete) frees room."""
    return Quota("facts", keys.user_pk(tenant), "FACT#", limit, setting="MAX_FACTS", counted_if=("archivedAt", False))


def memories(owner_pk: str, scope: str, limit: int = 0) -> Quota:
    """Stored memory rows (archived ones too: they are kept and listed) of one agent or workspace."""
    return Quota("memories", owner_pk, "MEM#", limit, per=scope, setting="MAX_MEMORIES_PER_SCOPE")


def sessions(tenant: str, agent_id: str, limit: int = 0) -> Quota:
    return Quota("sessions", keys.agent_pk(tenant, agent_id), "SESSION#", limit, per="agent", setting="MAX_SESSIONS_PER_AGENT")


def connections(tenant: str, limit: int = 0) -> Quota:
    return Quota("connections", keys.tenant_pk(tenant), "CONN#", limit, setting="MAX_CONNECTIONS")


def api_keys(tenant: str, limit: int = 0) -> Quota:
    return Quota("apiKeys", keys.tenant_pk(tenant), "APIKEY#", limit, setting="MAX_API_KEYS")
