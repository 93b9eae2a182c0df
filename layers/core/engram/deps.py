"""The container of everything a handler needs, built once per Lambda container.

Clients are created lazily (a handler that never calls a model never imports the SDK) and can
be replaced wholesale by tests and benchmarks with `set_deps`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.engine.prompt import PromptSection
from engram.engine.tools import ToolRegistry, default_registry
from engram.kernel.settings import Settings, get_settings
from engram.agents.repository import AgentRepository, WorkspaceRepository
from engram.aws.queues import Queues
from engram.aws.table import Table
from engram.cards.repository import CardTypeRepository
from engram.conversations.repository import SessionRepository
from engram.conversations.transcripts import HistoryStore
from engram.facts.repository import FactRepository
from engram.memory.repository import MemoryRepository
from engram.extraction.repository import ExtractionStore
from engram.recall.archive import ArchiveStore
from engram.run_memory.repository import RunMemoryStore
from engram.runs.repository import RunRepository
from engram.usage.repository import UsageRepository

if TYPE_CHECKING:
    from engram.engine.providers.base import ModelProvider


@dataclass
class Deps:
    settings: Settings
    table: Table
    history: HistoryStore
    queues: Queues
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
    registry: ToolRegistry = field(default_factory=lambda: all_tools())
    sections: list[PromptSection] = None  # type: ignore[assignment]  # the memory sections when not given
    provider_override: Any = None
    schedules_override: Any = None
    _provider: Any = None
    _schedules: Any = None
    _executor: ThreadPoolExecutor | None = None

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
        if self.sections is None:
            from engram.memory.section import memory_sections

            self.sections = memory_sections(self.settings.agent_memory_token_budget)

    @property
    def provider(self) -> "ModelProvider":
        if self.provider_override is not None:
            return self.provider_override
        if self._provider is None:
            from engram.engine.providers import make_provider

            self._provider = make_provider(self.settings, self.registry)
        return self._provider

    @property
    def schedules(self) -> Any:
        """EventBridge Scheduler (stores/schedules.py), created on first use."""
        if self.schedules_override is not None:
            return self.schedules_override
        if self._schedules is None:
            from engram.runs.schedules import ScheduleStore

            self._schedules = ScheduleStore(self.settings)
        return self._schedules

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="engram-io")
        return self._executor

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> "Deps":
        return cls(
            settings=settings,
            table=overrides.pop("table", None) or Table(settings.table_name),
            history=overrides.pop("history", None) or HistoryStore(settings.bucket_name),
            queues=overrides.pop("queues", None) or Queues(settings.turn_queue_url, settings.extract_queue_url, run_queue_url=settings.run_queue_url),
            **overrides,
        )


def all_tools() -> ToolRegistry:
    """Every tool the agent loop offers: built-ins, long-term memory, conversation search, decisions, run memory."""
    from engram.recall.index import register_tools as recall_tools
    from engram.cards.tools import register_tools as decision_tools
    from engram.memory.tools import register_tools as memory_tools
    from engram.run_memory.tools import register_tools as run_memory_tools

    registry = default_registry()
    memory_tools(registry)
    recall_tools(registry)
    decision_tools(registry)
    run_memory_tools(registry)
    return registry


_deps: Deps | None = None


def get_deps() -> Deps:
    global _deps
    if _deps is None:
        _deps = Deps.from_settings(get_settings())
    return _deps


def set_deps(deps: Deps | None) -> None:
    global _deps
    _deps = deps
