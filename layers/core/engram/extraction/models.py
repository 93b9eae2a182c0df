"""The extraction job's records: the model's answer (its candidate facts), its claim on a run, the rows
it writes, and how a claim ends."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from engram.kernel.errors import Conflict
from engram.memory.models import Memory, OwnerScope


class AlreadyExtracted(Exception):
    """The run's extraction already committed: a redelivered job."""

    def __init__(self, marker: Mapping[str, object]):
        super().__init__("already extracted")
        self.marker = marker


class ExtractionBusy(Exception):
    """Another delivery of the same job holds the marker's lease right now."""


class LeaseLost(Exception):
    """This attempt's lease ran out and another attempt took the marker over."""


class RowsChanged(Conflict):
    """A memory row changed between the read and the commit (the job is retried)."""


@dataclass(frozen=True)
class Claim:
    attempt_id: str
    attempt: int  # 1 for the first delivery


@dataclass(frozen=True)
class RowWrite:
    """One memory row to put: `expect_updated_at` None means it must not exist yet."""

    memory: Memory
    owner_id: str
    expect_updated_at: str | None


class Candidate(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    slug: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    value: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    scope: OwnerScope
    confidence: Annotated[float, Field(ge=0, le=1)]
    supersedes: str | None = None


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    facts: Annotated[list[Candidate], Field(max_length=50)]
