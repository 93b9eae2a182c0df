"""The container of everything a handler needs, built once per Lambda container.

Clients are created lazily (a handler that never calls a model never imports the SDK) and can
be replaced wholesale by tests and benchmarks with `set_deps`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .agent.prompt import PromptSection
from .agent.tools import ToolRegistry, default_registry
from .settings import Settings, get_settings
from .stores.history import HistoryStore
from .stores.queues import Queues
from .stores.table import TableStore

if TYPE_CHECKING:
    from .providers.base import ModelProvider


@dataclass
class Deps:
    settings: Settings
    table: TableStore
    history: HistoryStore
    queues: Queues
    registry: ToolRegistry = field(default_factory=default_registry)
    sections: list[PromptSection] = field(default_factory=list)
    provider_override: Any = None
    _provider: Any = None
    _executor: ThreadPoolExecutor | None = None

    @property
    def provider(self) -> "ModelProvider":
        if self.provider_override is not None:
            return self.provider_override
        if self._provider is None:
            from .providers import make_provider

            self._provider = make_provider(self.settings, self.registry)
        return self._provider

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="engram-io")
        return self._executor

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> "Deps":
        return cls(
            settings=settings,
            table=overrides.pop("table", None) or TableStore(settings.table_name),
            history=overrides.pop("history", None) or HistoryStore(settings.bucket_name),
            queues=overrides.pop("queues", None) or Queues(settings.turn_queue_url, settings.extract_queue_url),
            **overrides,
        )


_deps: Deps | None = None


def get_deps() -> Deps:
    global _deps
    if _deps is None:
        _deps = Deps.from_settings(get_settings())
    return _deps


def set_deps(deps: Deps | None) -> None:
    global _deps
    _deps = deps
