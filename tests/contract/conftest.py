"""Contract tests: each repository and store runs the same test against the in-memory fakes
(tests/fakes) and against moto, so the fakes the behaviour tests use cannot drift from the
emulator. Resources come from template.yaml on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from engram.kernel.settings import Settings, get_settings
from engram.wiring.stores import Stores, clients
from local.resources import Resources, create_resources
from local.template import load_template
from tests.fakes import fake_aws

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")


@dataclass
class Backend:
    kind: str  # "fake" or "moto"
    resources: Resources
    settings: Settings
    stores: Stores


@pytest.fixture(params=["fake", "moto"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """The template's resources on one backend, with the stores of the API function over them."""
    context: AbstractContextManager[Any] = fake_aws() if request.param == "fake" else mock_aws()
    with context:
        resources = create_resources(TEMPLATE)
        for key, value in {**resources.env(), **resources.env("ApiFunction")}.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        settings = get_settings()
        try:
            yield Backend(request.param, resources, settings, Stores(**clients(settings)))
        finally:
            get_settings.cache_clear()
