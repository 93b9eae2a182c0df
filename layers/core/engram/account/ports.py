"""What the account services may call: export job rows and export objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from engram.account.models import ExportJob


class ExportJobs(Protocol):
    def create(self, tenant: str, job: ExportJob) -> None: ...

    def get(self, tenant: str, export_id: str) -> ExportJob | None: ...

    def all(self, tenant: str) -> list[ExportJob]: ...

    def claim(self, tenant: str, export_id: str, *, claim_s: int) -> ExportJob | None:
        """queued (or running with a lapsed claim) -> running; None: finished or claimed elsewhere."""
        ...

    def progress(self, tenant: str, export_id: str, *, counts: dict[str, int], size: int, parts: int) -> None: ...

    def finish(self, tenant: str, job: ExportJob) -> bool:
        """Writes the final state; False if the row is gone (the account was deleted meanwhile)."""
        ...

    def delete_all(self, tenant: str) -> int: ...


class JsonLinesWriter(Protocol):
    bytes: int
    parts: int

    def write(self, record: Mapping[str, object]) -> bool:
        """Appends one line; True when a part was uploaded by this call."""
        ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class ExportObjects(Protocol):
    def writer(self, key: str, *, part_bytes: int) -> JsonLinesWriter: ...

    def download_url(self, key: str, *, filename: str, expires_s: int) -> str: ...

    def delete(self, key: str) -> None: ...

    def delete_prefix(self, prefix: str) -> int: ...
