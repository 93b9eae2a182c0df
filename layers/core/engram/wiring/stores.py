"""Settings, AWS clients (created lazily) and every repository over them (each built, and its
module imported, with its first use)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypedDict

from engram.aws.deadline import ContextThreadPool
from engram.aws.queues import Queues
from engram.aws.table import Table
from engram.kernel.ports import JobQueues
from engram.kernel.settings import Settings

if TYPE_CHECKING:  # the api function loads no engine module, and each repository with its first use
    from engram.account.ports import ExportJobs, ExportObjects
    from engram.agents.ports import Agents, Workspaces
    from engram.agents.repository import AgentRepository
    from engram.apikeys.oauth_clients import OAuthClients
    from engram.apikeys.ports import ApiKeys
    from engram.approvals.ports import Approvals
    from engram.aws.sockets import SocketPusher
    from engram.cards.ports import CardTypes
    from engram.connections.ports import Connections, OAuthStates, SecretBox
    from engram.conversations.ports import Sessions, Transcripts
    from engram.conversations.repository import SessionRepository
    from engram.conversations.transcripts import HistoryRepository
    from engram.engine.tools import ToolContext
    from engram.extraction.ports import ExtractionClaims
    from engram.facts.ports import Facts, Profiles
    from engram.memory.ports import Memories
    from engram.memory.repository import MemoryRepository
    from engram.recall.ports import Archive
    from engram.run_memory.ports import RunMemories
    from engram.runs.ports import RunDecisions, Runs, Schedules, TurnAdmissions
    from engram.runs.repository import RunRepository
    from engram.runs.schedules import ScheduleRepository
    from engram.streaming.ports import Pusher, Streams
    from engram.usage.ports import UsageLedger
    from engram.usage.repository import UsageRepository


# The repositories, each built (and its module imported) with its first use of a Stores.


def _build_agent_repository(stores: Stores) -> AgentRepository:
    from engram.agents.repository import AgentRepository

    return AgentRepository(stores.table)


def _build_session_repository(stores: Stores) -> SessionRepository:
    from engram.conversations.repository import SessionRepository

    return SessionRepository(stores.table)


def _build_usage_repository(stores: Stores) -> UsageRepository:
    from engram.usage.repository import UsageRepository

    return UsageRepository(stores.table)


def _build_memory_repository(stores: Stores) -> MemoryRepository:
    from engram.memory.repository import MemoryRepository

    return MemoryRepository(stores.table)


def _build_run_repository(stores: Stores) -> RunRepository:
    # The run and extraction commits are transactions over the same table as these rows.
    from engram.runs.repository import RunRepository

    settings = stores.settings
    return RunRepository(
        stores.table,
        stores._session_repository,
        stores._usage_repository,
        retention_days=settings.run_retention_days,
        stale_after_s=(
            settings.async_turn_budget_s + settings.run_stale_grace_s,
            2 * settings.run_budget_s + 60 + settings.run_stale_grace_s,
        ),
    )


def _build_agents(stores: Stores) -> Agents:
    return stores._agent_repository


def _build_workspaces(stores: Stores) -> Workspaces:
    return stores._agent_repository.workspaces


def _build_sessions(stores: Stores) -> Sessions:
    return stores._session_repository


def _build_usage(stores: Stores) -> UsageLedger:
    return stores._usage_repository


def _build_memories(stores: Stores) -> Memories:
    return stores._memory_repository


def _build_runs(stores: Stores) -> Runs:
    return stores._run_repository


def _build_run_decisions(stores: Stores) -> RunDecisions:
    from engram.runs.repository import RunDecisionRepository

    return RunDecisionRepository(stores.table)


def _build_approvals(stores: Stores) -> Approvals:
    from engram.approvals.repository import ApprovalRepository

    return ApprovalRepository(stores.table)


def _build_turn_admissions(stores: Stores) -> TurnAdmissions:
    from engram.runs.admission import TurnAdmissionRepository

    return TurnAdmissionRepository(stores.table, stores._run_repository)


def _build_extraction(stores: Stores) -> ExtractionClaims:
    from engram.extraction.repository import ExtractionRepository

    return ExtractionRepository(stores.table, stores._memory_repository, stores._usage_repository)


def _build_card_types(stores: Stores) -> CardTypes:
    from engram.cards.repository import CardTypeRepository

    return CardTypeRepository(stores.table)


def _build_facts(stores: Stores) -> Facts:
    from engram.facts.repository import FactRepository

    return FactRepository(stores.table)


def _build_profiles(stores: Stores) -> Profiles:
    from engram.facts.repository import ProfileRepository

    return ProfileRepository(stores.table)


def _build_archive(stores: Stores) -> Archive:
    from engram.recall.archive import ArchiveRepository

    return ArchiveRepository(stores.table)


def _build_run_memory(stores: Stores) -> RunMemories:
    from engram.run_memory.repository import RunMemoryRepository

    return RunMemoryRepository(stores.table)


def _build_exports(stores: Stores) -> ExportJobs:
    from engram.account.repository import ExportJobRepository

    return ExportJobRepository(stores.table)


def _build_export_objects(stores: Stores) -> ExportObjects:
    from engram.account.objects import ExportObjectRepository

    return ExportObjectRepository(stores.settings.bucket_name)


def _build_connections(stores: Stores) -> Connections:
    from engram.connections.repository import ConnectionRepository

    return ConnectionRepository(stores.table)


def _build_oauth_states(stores: Stores) -> OAuthStates:
    from engram.connections.repository import OAuthStateRepository

    return OAuthStateRepository(stores.table)


def _build_api_keys(stores: Stores) -> ApiKeys:
    from engram.apikeys.repository import ApiKeyRepository

    return ApiKeyRepository(stores.table)


def _build_oauth_clients(stores: Stores) -> OAuthClients | None:
    from engram.apikeys.oauth_clients import OAuthClients

    return OAuthClients(stores.table) if stores.settings.user_pool_id else None


def _build_streams(stores: Stores) -> Streams:
    from engram.streaming.repository import StreamRepository

    return StreamRepository(stores.table)


@dataclass
class Stores:
    settings: Settings
    table: Table
    history: Transcripts
    queues: JobQueues
    schedules_override: Schedules | None = None  # a store to use instead of the one built on first use
    secret_box_override: SecretBox | None = None
    pusher_override: Pusher | None = None
    _pusher: SocketPusher | None = field(default=None, init=False, repr=False)
    _secret_box: SecretBox | None = field(default=None, init=False, repr=False)
    _schedules: ScheduleRepository | None = field(default=None, init=False, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    # Each repository is built, and its module imported, on first use (the builders below): a
    # request imports the repositories it reads and writes, not the twenty others (issue 33, item
    # 7). Each is typed by its port (the feature's `ports` module): what services may call. Two
    # threads' first uses may each build one; both are stateless views of the same table.
    _agent_repository = cached_property(_build_agent_repository)
    _session_repository = cached_property(_build_session_repository)
    _usage_repository = cached_property(_build_usage_repository)
    _memory_repository = cached_property(_build_memory_repository)
    _run_repository = cached_property(_build_run_repository)
    agents = cached_property(_build_agents)
    workspaces = cached_property(_build_workspaces)
    sessions = cached_property(_build_sessions)
    usage = cached_property(_build_usage)
    memories = cached_property(_build_memories)
    runs = cached_property(_build_runs)
    run_decisions = cached_property(_build_run_decisions)
    approvals = cached_property(_build_approvals)  # Decisions on held tool calls (TL10).
    turn_admissions = cached_property(_build_turn_admissions)
    extraction = cached_property(_build_extraction)
    card_types = cached_property(_build_card_types)
    facts = cached_property(_build_facts)
    profiles = cached_property(_build_profiles)
    archive = cached_property(_build_archive)
    run_memory = cached_property(_build_run_memory)
    exports = cached_property(_build_exports)
    export_objects = cached_property(_build_export_objects)
    connections = cached_property(_build_connections)
    oauth_states = cached_property(_build_oauth_states)
    api_keys = cached_property(_build_api_keys)
    oauth_clients = cached_property(_build_oauth_clients)  # RFC 7591 registrations (USER_POOL_ID).
    streams = cached_property(_build_streams)

    @property
    def pusher(self) -> Pusher:
        """The WebSocket API's management API (STREAM_URL), its client created on first use."""
        if self.pusher_override is not None:
            return self.pusher_override
        if self._pusher is None:
            from engram.aws.sockets import SocketPusher  # with the first push: few requests push

            self._pusher = SocketPusher(self.settings.stream_url, endpoint=self.settings.stream_endpoint)
        return self._pusher

    @property
    def secret_box(self) -> SecretBox:
        """KMS for the connections' auth values, its client created on first use."""
        if self.secret_box_override is not None:
            return self.secret_box_override
        if self._secret_box is None:
            from engram.aws.kms import KmsSecretBox  # with the first sealed or opened auth value

            self._secret_box = KmsSecretBox(self.settings.connection_key_id)
        return self._secret_box

    @property
    def schedules(self) -> Schedules:
        """EventBridge Scheduler, created on first use."""
        if self.schedules_override is not None:
            return self.schedules_override
        if self._schedules is None:
            from engram.runs.schedules import ScheduleRepository  # and its expression parser: with the first schedule

            self._schedules = ScheduleRepository(self.settings)
        return self._schedules

    @property
    def executor(self) -> ThreadPoolExecutor:
        """A small pool for the parallel reads of a request (agent + lease, sections + transcript)."""
        if self._executor is None:
            self._executor = ContextThreadPool(max_workers=4, thread_name_prefix="engram-io")
        return self._executor


class ClientsGiven(TypedDict, total=False):
    """The clients a caller may give instead of those `settings` names (tests, the local stack)."""

    table: Table | None
    history: HistoryRepository | None
    queues: Queues | None


class Clients(TypedDict):
    """What every Stores is built over: `Stores(**clients(settings))`."""

    settings: Settings
    table: Table
    history: Transcripts
    queues: JobQueues


def clients(
    settings: Settings, *, table: Table | None = None, history: HistoryRepository | None = None, queues: Queues | None = None
) -> Clients:
    """The table, bucket and queues of `settings` (or the ones given: tests, the local stack)."""
    from engram.conversations.transcripts import HistoryRepository  # and the message models, with the first request

    return {
        "settings": settings,
        "table": table or Table(settings.table_name),
        "history": history or HistoryRepository(settings.bucket_name),
        "queues": queues or Queues(settings.turn_queue_url, settings.extract_queue_url, run_queue_url=settings.run_queue_url),
    }


def stores_of(ctx: ToolContext) -> Stores:
    """The stores a tool or prompt section reaches through its turn's context (the engine types
    `ctx.deps` as ToolDeps only: it knows no feature's store)."""
    deps = ctx.deps
    if not isinstance(deps, Stores):
        raise TypeError(f"a tool's context carries {type(deps).__name__}, not the function's Stores")
    return deps
