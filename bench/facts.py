"""Adding user facts one by one (POST /api/me/facts's use case): the time to add 600 distinct
facts, then to restate each once (the duplicate check), against the in-memory fakes and against
moto. Each add is one bounded duplicate lookup, so the time per add stays flat as facts pile up;
a check that read every fact grew with the count (about 285 s for 600 facts on moto).

    python -m bench.facts [count]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from bench.memory_sections import ROOT  # its import puts the core on sys.path and sets a local AWS environment

_WORDS = ["amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel", "lagoon"]


def _text(i: int) -> str:
    """A distinct fact per i (distinct after normalisation too)."""
    return f"I keep a {_WORDS[i % 12]} notebook number {i} on the {_WORDS[(i // 12) % 12]} shelf"


def _fakes() -> AbstractContextManager[Any]:
    import boto3

    from tests.fakes import active, fake_aws

    real = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        fake = active()
        return fake.client(service) if fake is not None else real(service, *args, **kwargs)

    boto3.client = client  # type: ignore[assignment]
    return fake_aws()


def _moto() -> AbstractContextManager[Any]:
    from moto import mock_aws

    from local.emulator import patch_moto

    patch_moto()  # as the local stack runs it: plain moto deep-copies the whole table per transaction
    return mock_aws()


def _run(backend: Callable[[], AbstractContextManager[Any]], count: int) -> tuple[float, float, float]:
    from engram.facts import service as facts
    from engram.kernel.ids import tenant_key
    from engram.kernel.settings import Settings
    from engram.roots import api
    from local.resources import create_resources
    from local.template import load_template

    with backend():
        resources = create_resources(load_template(ROOT / "template.yaml"))
        deps = api.build(Settings.from_env(resources.env()))
        facts.add_fact(
            deps.facts, deps.settings, tenant_key("warm-up"), _text(0), source="profile", confidence="asserted"
        )  # lazy imports
        t = tenant_key("bench")
        start = time.perf_counter()
        last_tenth = 0.0
        for i in range(count):
            if i == count - count // 10:
                last_tenth = time.perf_counter()
            facts.add_fact(deps.facts, deps.settings, t, _text(i), source="profile", confidence="asserted")
        added = time.perf_counter() - start
        tail = (time.perf_counter() - last_tenth) / max(1, count // 10)
        start = time.perf_counter()
        for i in range(count):
            _, created = facts.add_fact(
                deps.facts, deps.settings, t, _text(i).upper() + "!", source="profile", confidence="asserted"
            )
            assert not created, "a restated fact must refresh the stored one"
        restated = time.perf_counter() - start
    return added, tail, restated


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    print(f"== adding {count} user facts, then restating each (duplicate check)")
    print(f"{'backend':>8} {'add all':>10} {'per add (last 10%)':>20} {'restate all':>12}")
    for name, backend in (("fakes", _fakes), ("moto", _moto)):
        added, tail, restated = _run(backend, count)
        print(f"{name:>8} {added:>9.2f}s {tail * 1000:>18.1f}ms {restated:>11.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
