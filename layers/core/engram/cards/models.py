"""Card types (result schemas held as data) and decision entries."""

from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from engram.kernel.model import Body, Resource, json_types

FieldName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
ActionWord = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,29}$")]
# One Literal, so an error names just the field; 0 and 1 are not false and true.
ReExaminable = Annotated[
    Literal[False, True, "until_resolved"], json_types(bool, str, expected='true, false or "until_resolved"')
]
CardFieldType = Literal["string", "number", "integer", "boolean", "enum"]


class CardField(Body):
    """One field of a card type (the small schema language cards are validated with)."""

    type: CardFieldType
    required: bool = False
    enum: (
        Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=40)]], Field(min_length=1, max_length=30)] | None
    ) = None
    min: float | None = None
    max: float | None = None
    max_length: Annotated[int, Field(ge=1, le=2000)] | None = None
    description: Annotated[str, StringConstraints(max_length=500)] = ""


class CardTypeBody(Body):
    """PUT /api/card-types/{name}: creates or replaces a custom card type of the caller."""

    description: Annotated[str, StringConstraints(max_length=1000)] = ""
    fields: Annotated[dict[FieldName, CardField], Field(min_length=1, max_length=30)]
    re_examinable: ReExaminable = False
    re_examine_actions: Annotated[list[ActionWord], Field(max_length=20)] = []
    summary_fields: Annotated[list[FieldName], Field(max_length=5)] = []


class CardType(Resource):
    """A named result schema; `id` is its name. Built-ins are the same for every user."""

    name: str
    description: str = ""
    fields: dict[str, dict[str, Any]]
    re_examinable: ReExaminable = False
    re_examine_actions: list[str] = []
    summary_fields: list[str] = []
    built_in: bool = False


class Decision(BaseModel):
    """A compact entry of an agent's past result card (GET /api/agents/{agentId}/decisions)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    run_id: str
    created_at: str
    card_type: str | None = None
    action: str
    summary: str
    entry: str
    card: dict[str, Any]

    def public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, mode="json")


class CardedRun(Protocol):
    """What a decision is read from: a finished run whose result carries a card (runs.models.Run;
    typed here by shape, so the card types know nothing of runs)."""

    @property
    def id(self) -> str: ...
    @property
    def created_at(self) -> str: ...
    @property
    def result(self) -> Any: ...
