"""Settings, AWS clients (created lazily) and every repository over them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from engram.account.objects import ExportObjectRepository
from engram.account.ports import ExportJobs, ExportObjects
from engram.account.repository import ExportJobRepository
from engram.agents.ports import Agents, Workspaces
from engram.agents.repository import AgentRepository
from engram.apikeys.oauth_clients import OAuthClients
from engram.apikeys.ports import ApiKeys
from engram.apikeys.repository import ApiKeyRepository
from engram.approvals.ports import Approvals
from engram.approvals.repository import ApprovalRepository
from engram.aws.deadline import ContextThreadPool
from engram.aws.queues import Queues
from engram.aws.table import Table
from engram.cards.ports import CardTypes
from engram.cards.repository import CardTypeRepository
from engram.connections.ports import Connections, OAuthStates, SecretBox
from engram.connections.repository import ConnectionRepository, OAuthStateRepository
from engram.conversations.ports import Sessions, Transcripts
from engram.conversations.repository import SessionRepository
from engram.conversations.transcripts import HistoryRepository
from engram.extraction.ports import ExtractionClaims
from engram.extraction.repository import ExtractionRepository
from engram.facts.ports import Facts, Profiles
from engram.facts.repository import FactRepository, ProfileRepository
from engram.kernel.ports import JobQueues
from engram.kernel.settings import Settings
from engram.memory.ports import Memories
from engram.memory.repository import MemoryRepository
from engram.recall.archive import ArchiveRepository
from engram.recall.ports import Archive
from engram.run_memory.ports import RunMemories
from engram.run_memory.repository import RunMemoryRepository
from engram.runs.ports import RunDecisions, Runs, Schedules, TurnAdmissions
from engram.runs.repository import RunDecisionRepository, RunRepository, TurnAdmissionRepository
from engram.streaming.ports import Pusher, Streams
from engram.streaming.repository import StreamRepository
from engram.usage.ports import UsageLedger
from engram.usage.repository import UsageRepository

if TYPE_CHECKING:  # the api function loads no engine module
    from engram.aws.sockets import SocketPusher
    from engram.engine.tools import ToolContext
    from engram.runs.schedules import ScheduleRepository


@dataclass
class Stores:
    settings: Settings
    table: Table
    history: Transcripts
    queues: JobQueues
    schedules_override: Schedules | None = None  # a store to use instead of the one built on first use
    secret_box_override: SecretBox | None = None
    pusher_override: Pusher | None = None
    # Each repository is typed by its port (the feature's `ports` module): what services may call.
    workspaces: Workspaces = field(init=False)
    agents: Agents = field(init=False)
    sessions: Sessions = field(init=False)
    runs: Runs = field(init=False)
    run_decisions: RunDecisions = field(init=False)
    approvals: Approvals = field(init=False)  # decisions on held tool calls (TL10)
    turn_admissions: TurnAdmissions = field(init=False)
    usage: UsageLedger = field(init=False)
    card_types: CardTypes = field(init=False)
    memories: Memories = field(init=False)
    facts: Facts = field(init=False)
    archive: Archive = field(init=False)
    run_memory: RunMemories = field(init=False)
    extraction: ExtractionClaims = field(init=False)
    exports: ExportJobs = field(init=False)
    export_objects: ExportObjects = field(init=False)
    connections: Connections = field(init=False)
    oauth_states: OAuthStates = field(init=False)
    api_keys: ApiKeys = field(init=False)
    oauth_clients: OAuthClients | None = field(init=False)  # RFC 7591 registrations (USER_POOL_ID)
    profiles: Profiles = field(init=False)
    streams: Streams = field(init=False)
    _pusher: SocketPusher | None = field(default=None, init=False, repr=False)
    _secret_box: SecretBox | None = field(default=None, init=False, repr=False)
    _schedules: ScheduleRepository | None = field(default=None, init=False, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        agents, sessions, usage, memories = (
            AgentRepository(self.table),
            SessionRepository(self.table),
            UsageRepository(self.table),
            MemoryRepository(self.table),
        )
        self.agents, self.workspaces, self.sessions, self.usage, self.memories = (
            agents,
            agents.workspaces,
            sessions,
            usage,
            memories,
        )
        # The run and extraction commits are transactions over the same table as these rows.
        settings = self.settings
        self.runs = RunRepository(
            self.table,
            sessions,
            usage,
            retention_days=settings.run_retention_days,
            stale_after_s=(
                settings.async_turn_budget_s + settings.run_stale_grace_s,
                2 * settings.run_budget_s + 60 + settings.run_stale_grace_s,
            ),
        )
        self.run_decisions = RunDecisionRepository(self.table)
        self.approvals = ApprovalRepository(self.table)
        self.turn_admissions = TurnAdmissionRepository(self.table, self.runs)
        self.extraction = ExtractionRepository(self.table, memories, usage)
        self.card_types = CardTypeRepository(self.table)
        self.facts = FactRepository(self.table)
        self.archive = ArchiveRepository(self.table)
        self.run_memory = RunMemoryRepository(self.table)
        self.exports = ExportJobRepository(self.table)
        self.export_objects = ExportObjectRepository(self.settings.bucket_name)
        self.connections = ConnectionRepository(self.table)
        self.oauth_states = OAuthStateRepository(self.table)
        self.api_keys = ApiKeyRepository(self.table)
        self.oauth_clients = OAuthClients(self.table) if settings.user_pool_id else None
        self.profiles = ProfileRepository(self.table)
        self.streams = StreamRepository(self.table)

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
