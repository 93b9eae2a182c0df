"""What the account services may call: export job rows and export objects, and the stores of
every feature that an export reads and a deletion empties."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from engram.account.models import ExportJob
from engram.agents.ports import Agents, Workspaces
from engram.apikeys.ports import ApiKeys
from engram.cards.ports import CardTypes
from engram.connections.ports import Connections, OAuthStates, SecretBox
from engram.conversations.ports import Sessions, Transcripts
from engram.facts.ports import Facts, Profiles
from engram.kernel.settings import Settings
from engram.memory.ports import Memories
from engram.recall.ports import Archive
from engram.run_memory.ports import RunMemories
from engram.runs.ports import Runs, Schedules
from engram.streaming.ports import Pusher, Streams
from engram.usage.ports import UsageLedger


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


class AccountReads(Protocol):
    """Every store an account's records are read from (account.service.records; wiring.Stores is
    one). Read as attributes: nothing is made until an export or a deletion reaches it."""

    @property
    def settings(self) -> Settings: ...
    @property
    def agents(self) -> Agents: ...
    @property
    def workspaces(self) -> Workspaces: ...
    @property
    def sessions(self) -> Sessions: ...
    @property
    def history(self) -> Transcripts: ...
    @property
    def archive(self) -> Archive: ...
    @property
    def memories(self) -> Memories: ...
    @property
    def run_memory(self) -> RunMemories: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def profiles(self) -> Profiles: ...
    @property
    def facts(self) -> Facts: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def card_types(self) -> CardTypes: ...
    @property
    def connections(self) -> Connections: ...
    @property
    def api_keys(self) -> ApiKeys: ...


class ExportStores(AccountReads, Protocol):
    """An export job's worker: the records, the job's row and its object."""

    @property
    def exports(self) -> ExportJobs: ...
    @property
    def export_objects(self) -> ExportObjects: ...


class AccountStores(ExportStores, Protocol):
    """Deleting an account: everything above, the agents' schedules, the OAuth grants revoked at
    their servers (connections.oauth.OAuthDeps), the open sockets closed."""

    @property
    def schedules(self) -> Schedules: ...
    @property
    def oauth_states(self) -> OAuthStates: ...
    @property
    def secret_box(self) -> SecretBox: ...
    @property
    def streams(self) -> Streams: ...
    @property
    def pusher(self) -> Pusher: ...
