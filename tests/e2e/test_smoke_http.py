"""`make smoke` (smoke/) against the local stack, as README's Deploy section runs it against AWS:
it passes, prints every step, and leaves nothing it created behind; a failing step says where,
with the status and the error envelope, and the walk still cleans up."""

from __future__ import annotations

import io
import re

from smoke import main
from tests.e2e.test_local_stack_http import http
from tests.faults import REFUSED, Faults

STEPS = (
    "console page",
    "create agent",
    'chat 1: "hello"',
    'chat 2: "remember that I prefer green tea"',
    'chat 3: "what do you know about me?"',
    "read facts",
    "async turn",
    "manual run",
    "re-examine",
    "clean up: archive its facts",
    "clean up: delete agent",
)


def smoke(url: str, user: str, *extra: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = main(["--url", url, "--token", f"dev-{user}", *extra], out=out)
    return code, out.getvalue().splitlines()


def step_line(lines: list[str], name: str) -> str:
    return next(line for line in lines if name in line)


def test_the_smoke_test_passes_and_leaves_nothing_behind(live):
    url = live.url.rstrip("/")
    code, lines = smoke(url, "smoke")
    assert code == 0, "\n".join(lines)
    assert lines[-1].startswith("PASS  11 steps") and "model: offline" in lines[-1]
    for name in STEPS:
        assert re.match(r"  ok +.+ +\d+ ms", step_line(lines, name)), name
    assert "offline model" in step_line(lines, "chat 1")
    assert "I prefer green tea" in step_line(lines, "read facts")
    assert "conviction" in step_line(lines, "re-examine")
    assert "1 archived" in step_line(lines, "archive its facts")

    status, agents = http(url, "GET", "/api/agents", user="smoke")
    assert status == 200 and agents["data"]["items"] == []
    status, facts = http(url, "GET", "/api/me/facts", user="smoke")
    assert status == 200 and facts["data"]["items"] == []
    status, facts = http(url, "GET", "/api/me/facts?includeArchived=true", user="smoke")
    archived = facts["data"]["items"]
    assert [f["fact"] for f in archived] == ["I prefer green tea"]
    assert archived[0]["archivedReason"] == "user_deleted"

    # a second walk for the same user passes too (the archived fact does not stand in the way)
    code, lines = smoke(url, "smoke")
    assert code == 0, "\n".join(lines)
    assert http(url, "GET", "/api/agents", user="smoke")[1]["data"]["items"] == []


def test_a_failing_step_is_named_with_status_and_envelope_and_the_walk_still_cleans_up(live, faults: Faults):
    url = live.url.rstrip("/")
    run_queue = live.env["RUN_QUEUE_URL"]
    faults.add("sqs", "SendMessage", REFUSED, when=lambda params: params.get("QueueUrl") == run_queue)
    code, lines = smoke(url, "smoke-fails")
    assert code == 1, "\n".join(lines)
    failed = step_line(lines, "manual run")
    assert failed.startswith("  FAIL") and "expected 202, got 503 queue_unavailable" in failed
    assert any(re.match(r" +POST /api/agents/ag_\w+/runs -> 503$", line) for line in lines)
    assert any('"code": "queue_unavailable"' in line for line in lines)
    assert not any("re-examine" in line for line in lines)  # the walk stops at the failure
    assert step_line(lines, "clean up: delete agent").startswith("  ok")
    assert lines[-2].startswith("FAIL  at step 'manual run (202, polled, its card)': expected 202, got 503 queue_unavailable")
    assert '"success": false' in lines[-1]
    assert http(url, "GET", "/api/agents", user="smoke-fails")[1]["data"]["items"] == []
    assert http(url, "GET", "/api/me/facts", user="smoke-fails")[1]["data"]["items"] == []


def test_a_refused_token_fails_at_the_first_authenticated_step_with_a_hint(live):
    code, lines = smoke(live.url.rstrip("/"), "x", "--token", "not-a-token")
    assert code == 1
    assert step_line(lines, "create agent").startswith("  FAIL")
    assert any(line.strip() == "POST /api/agents -> 401" for line in lines)
    assert any("hint: the token was refused" in line for line in lines)
    assert not any("clean up" in line for line in lines)  # nothing was created
