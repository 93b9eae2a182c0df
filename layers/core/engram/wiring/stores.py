"""Settings, AWS clients (created lazily) and every repository over them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engram.agents.repository import AgentRepository, WorkspaceRepository
from engram.aws.queues import Queues
from engram.aws.table import Table
from engram.cards.repository import CardTypeRepository
from engram.conversations.repository import SessionRepository
from engram.conversations.transcripts import HistoryStore
from engram.extraction.repository import ExtractionStore
from engram.facts.repository import FactRepository
from engram.kernel.settings import Settings
from engram.memory.repository import MemoryRepository
from engram.recall.archive import ArchiveStore
from engram.run_memory.repository import RunMemoryStore
from engram.runs.repository import RunRepository
from engram.runs.schedules import ScheduleStore
from engram.usage.repository import UsageRepository


@dataclass
class Stores:
    settings: Settings
    table: Table
    history: HistoryStore
    queues: Queues
    schedules_override: Any = None  # a ScheduleStore to use instead of the one built on first use
    workspaces: WorkspaceRepository = field(init=False)
    agents: AgentRepository = field(init=False)
    sessions: SessionRepository = field(init=False)
    runs: RunRepository = field(init=False)
    usage: UsageRepository = field(init=False)
    card_types: CardTypeRepository = field(init=False)
    memories: MemoryRepository = field(init=False)
    facts: FactRepository = field(init=False)
    archive: ArchiveStore = field(init=False)
    run_memory: RunMemoryStore = field(init=False)
    extraction: ExtractionStore = field(init=False)
    _schedules: ScheduleStore | None = field(default=None, init=False, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.agents = AgentRepository(self.table)
        self.workspaces = self.agents.workspaces
        self.sessions = SessionRepository(self.table)
        self.usage = UsageRepository(self.table)
        self.runs = RunRepository(self.table, self.sessions, self.usage)
        self.card_types = CardTypeRepository(self.table)
        self.memories = MemoryRepository(self.table)
        self.facts = FactRepository(self.table)
        self.archive = ArchiveStore(self.table)
        self.run_memory = RunMemoryStore(self.table)
        self.extraction = ExtractionStore(self.table, self.memories, self.usage)

    @property
    def schedules(self) -> ScheduleStore:
        """EventBridge Scheduler, created on first use."""
        if self.schedules_override is not None:
            return self.schedules_override  # type: ignore[no-any-return]
        if self._schedules is None:
            self._schedules = ScheduleStore(self.settings)
        return self._schedules

    @property
    def executor(self) -> ThreadPoolExecutor:
        """A small pool for the parallel reads of a request (agent + lease, sections + transcript)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="engram-io")
        return self._executor


def clients(
    settings: Settings, *, table: Table | None = None, history: HistoryStore | None = None, queues: Queues | None = None
) -> dict[str, Any]:
    """The table, bucket and queues of `settings` (or the ones given: tests, the local stack)."""
    return {
        "settings": settings,
        "table": table or Table(settings.table_name),
        "history": history or HistoryStore(settings.bucket_name),
        "queues": queues or Queues(settings.turn_queue_url, settings.extract_queue_url, run_queue_url=settings.run_queue_url),
    }
