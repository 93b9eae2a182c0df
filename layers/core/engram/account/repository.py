"""Export job rows in the tenant partition (`EXPORT#<id>`), expiring with their objects."""

from __future__ import annotations

import time

from engram.account.models import ExportJob
from engram.aws import keys
from engram.aws.table import ConditionFailed, Table
from engram.kernel.model import now_iso


class ExportJobRepository:
    def __init__(self, table: Table):
        self.table = table

    def create(self, tenant: str, job: ExportJob) -> None:
        item = {
            "PK": keys.tenant_pk(tenant),
            "SK": keys.export_sk(job.id),
            **job.model_dump(by_alias=True, mode="json", exclude_none=True),
            "expiresAt": job.expires_at,
        }
        self.table.put(item, condition="attribute_not_exists(PK)")

    def get(self, tenant: str, export_id: str) -> ExportJob | None:
        item = self.table.get(keys.tenant_pk(tenant), keys.export_sk(export_id))
        return ExportJob.model_validate(item) if item else None

    def all(self, tenant: str) -> list[ExportJob]:
        """The tenant's export jobs (a few: each expires after EXPORT_RETENTION_DAYS)."""
        return [ExportJob.model_validate(i) for i in self.table.query_all(keys.tenant_pk(tenant), sk_prefix="EXPORT#")]

    def claim(self, tenant: str, export_id: str, *, claim_s: int) -> ExportJob | None:
        now = int(time.time())
        try:
            item = self.table.update(
                keys.tenant_pk(tenant),
                keys.export_sk(export_id),
                "SET #s = :running, claimedUntil = :until, updatedAt = :at",
                condition="attribute_exists(PK) AND (#s = :queued OR (#s = :running AND claimedUntil < :now))",
                names={"#s": "status"},
                values={":running": "running", ":queued": "queued", ":until": now + claim_s, ":now": now, ":at": now_iso()},
            )
        except ConditionFailed:
            return None
        return ExportJob.model_validate(item)

    def progress(self, tenant: str, export_id: str, *, counts: dict[str, int], size: int, parts: int) -> None:
        try:
            self.table.update(
                keys.tenant_pk(tenant),
                keys.export_sk(export_id),
                "SET counts = :counts, #b = :bytes, parts = :parts, updatedAt = :at",
                condition="#s = :running",
                names={"#s": "status", "#b": "bytes"},
                values={":counts": counts, ":bytes": size, ":parts": parts, ":at": now_iso(), ":running": "running"},
            )
        except ConditionFailed:
            pass  # deleted meanwhile: finish() tells the worker

    def finish(self, tenant: str, job: ExportJob) -> bool:
        changes = {
            "status": job.status,
            "counts": job.counts,
            "bytes": job.bytes,
            "parts": job.parts,
            "finishedAt": job.finished_at,
            "updatedAt": job.updated_at,
            "error": job.error,
            "claimedUntil": None,
        }
        try:
            self.table.set_fields(keys.tenant_pk(tenant), keys.export_sk(job.id), changes)
        except ConditionFailed:
            return False
        return True

    def delete_all(self, tenant: str) -> int:
        return self.table.delete_all(keys.tenant_pk(tenant), sk_prefix="EXPORT#")
