"""Tool output never becomes memory (TL4), as a user meets it: the local stack over HTTP (offline
model, a small history cap so the tool's turn is cut and summarised), a real MCP server on loopback
returning each text of the hostile corpus. No memory row, user fact or summary line carries a
case's marker; the person's own fact said in the same turn is remembered."""

from __future__ import annotations

import os

import pytest

from local.stack import start_stack
from tests.e2e.test_local_stack_http import http
from tests.hostile import DEV, HELD_OUT, load, over_http, serve_corpus


@pytest.fixture(scope="module")
def small_cap():
    was = os.environ.get("HISTORY_CAP")
    os.environ["HISTORY_CAP"] = "4"
    try:
        handle = start_stack(port=0, model_provider="offline", workers=False)
    finally:
        if was is None:
            os.environ.pop("HISTORY_CAP", None)
        else:
            os.environ["HISTORY_CAP"] = was
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize("corpus", [DEV, HELD_OUT], ids=["dev", "held-out"])
def test_no_hostile_tool_output_reaches_memory_facts_or_the_summary(small_cap, corpus):
    cases = load(corpus)
    server = serve_corpus(cases)
    try:
        url, drain = small_cap.url.rstrip("/"), lambda: small_cap.drain("ExtractQueue")
        reached = over_http(http, url, server.url, cases, drain, user=f"reader-{corpus.stem}".replace("_", "-"))
    finally:
        server.stop()
    assert len(reached) == sum(1 for c in cases if c["where"] == "tool_result")
    assert [r for r in reached if r.where] == []
    assert [r.case for r in reached if not r.own_fact] == []
