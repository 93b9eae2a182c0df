"""Account export as a job (issue 11, item 9): POST starts it, the heartbeat function streams the
account to S3 as JSON Lines, GET shows progress and a presigned URL; run records expire by kind."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

import pytest

from engram.aws import keys
from engram.kernel.ids import tenant_key
from engram.kernel.model import now_iso
from engram.runs.models import Run


def _mem(stack: Any, owner: str, **body: Any) -> None:
    r = stack.call("POST", f"{owner}/memories", body={"key": "k", "value": "v", **body})
    assert r.status in (200, 201), r.body


def _lines(stack: Any, url: str) -> list[dict[str, Any]]:
    """The object a presigned URL names (SigV4, virtual-hosted without an endpoint override; the
    e2e tests download one from the local stack)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Expires"] == ["900"]
    bucket = stack.deps.settings.bucket_name
    assert parts.netloc.startswith(f"{bucket}.s3.")
    key = urllib.parse.unquote(parts.path.lstrip("/"))
    assert key.startswith(keys.export_prefix(tenant_key("alice")))
    body = stack.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return [json.loads(line) for line in body.decode().splitlines()]


def _export(stack: Any, user: str = "alice") -> dict[str, Any]:
    started = stack.call("POST", "/api/me/export", user=user)
    assert started.status == 202, started.body
    assert started.headers["location"] == f"/api/me/export/{started.data['exportId']}"
    assert started.data["status"] == "queued"
    stack.drain_runs()
    done = stack.call("GET", f"/api/me/export/{started.data['exportId']}", user=user)
    assert done.status == 200, done.body
    return done.data


def test_an_export_job_writes_every_record_type_as_json_lines(moto_stack):
    stack = moto_stack
    agent = stack.agent()
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data
    _mem(stack, f"/api/agents/{agent['id']}", value="agent fact")
    _mem(stack, f"/api/workspaces/{ws['id']}", value="workspace fact")
    stack.call("POST", "/api/me/facts", body={"fact": "I like hiking"})
    assert stack.say(agent["id"], "hello there").status == 200
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "notes"})
    assert stack.say(agent["id"], "second session", session="notes").status == 200
    bob = stack.agent(user="bob")
    stack.say(bob["id"], "bob's words", user="bob")

    job = _export(stack)
    assert job["status"] == "succeeded" and job["error"] is None and job["finishedAt"]
    assert job["counts"] == {
        "agent": 1,
        "session": 2,
        "message": 4,
        "archive": 4,
        "memory": 2,
        "run": 2,
        "trace": 2,  # each run's timeline (OB1)
        "workspace": 1,
        "fact": 1,
        "usage": 2,
        "usageTotal": 4,  # the day and the month, the person's and the agent's
    }
    lines = _lines(stack, job["downloadUrl"])
    assert job["bytes"] == sum(len(json.dumps(x, ensure_ascii=False, separators=(",", ":")).encode()) + 1 for x in lines)
    assert lines[0]["type"] == "export" and lines[0]["data"]["exportId"] == job["id"]
    assert lines[-1] == {"type": "end", "data": {"counts": job["counts"]}}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for line in lines[1:-1]:
        by_type.setdefault(line["type"], []).append(line["data"])
    assert by_type["agent"][0]["id"] == agent["id"] and "webhookSecret" not in by_type["agent"][0]
    assert sorted(s["id"] for s in by_type["session"]) == ["dashboard", "notes"]
    first = [m for m in by_type["message"] if m["sessionId"] == "dashboard"]
    assert [m["index"] for m in first] == [0, 1] and first[0]["message"]["content"][0]["text"] == "hello there"
    assert {(m["scope"], m["ownerId"], m["value"]) for m in by_type["memory"]} == {
        ("agent", agent["id"], "agent fact"),
        ("workspace", ws["id"], "workspace fact"),
    }
    assert by_type["fact"][0]["fact"] == "I like hiking"
    assert {r["agentId"] for r in by_type["run"]} == {agent["id"]}
    assert "bob's words" not in json.dumps(lines)
    # The URL is short-lived and the file goes with its job.
    assert time.time() < _epoch(job["downloadUrlExpiresAt"]) <= time.time() + 901
    assert _epoch(job["availableUntil"]) > time.time() + 2 * 86400


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_an_export_in_progress_is_answered_again_and_an_unknown_one_is_404(moto_stack):
    first = moto_stack.call("POST", "/api/me/export")
    again = moto_stack.call("POST", "/api/me/export")
    assert again.status == 202 and again.data["exportId"] == first.data["exportId"]
    assert moto_stack.call("GET", f"/api/me/export/{first.data['exportId']}", user="bob").status == 404
    missing = moto_stack.call("GET", "/api/me/export/exp_nothing")
    assert missing.status == 404 and missing.error["field"] == "exportId"
    running = moto_stack.call("GET", f"/api/me/export/{first.data['exportId']}").data
    assert running["status"] == "queued" and "downloadUrl" not in running


def test_a_large_export_is_uploaded_in_parts_with_progress(moto_stack, monkeypatch):
    """A worker holds one part at a time: 5 MiB parts (S3's minimum) for an account of ~12 MB."""
    monkeypatch.setenv("EXPORT_PART_BYTES", str(5 * 1024 * 1024))
    from engram.kernel.settings import get_settings
    from engram.roots import heartbeat

    get_settings.cache_clear()
    moto_stack.deps = heartbeat.build(get_settings())
    moto_stack.use(moto_stack.deps)
    deps, t = moto_stack.deps, tenant_key("alice")
    agent = moto_stack.agent()
    big = "x" * 30_000
    now = now_iso()
    for n in range(400):  # ~12 MB of run records
        deps.runs.put(t, Run(id=f"run_{n:04d}", created_at=now, updated_at=now, agent_id=agent["id"], prompt=big))
    progress: list[int] = []
    real = deps.exports.progress

    def spy(*args: Any, **kw: Any) -> None:
        progress.append(kw["parts"])
        real(*args, **kw)

    monkeypatch.setattr(deps.exports, "progress", spy)
    job = _export(moto_stack)
    assert job["status"] == "succeeded", job
    assert job["parts"] == 3 and job["counts"]["run"] == 400 and job["bytes"] > 12_000_000
    assert progress == sorted(progress) and {1, 2} <= set(progress)
    lines = _lines(moto_stack, job["downloadUrl"])
    assert len(lines) == sum(job["counts"].values()) + 2 and lines[-1]["type"] == "end"


def test_a_failed_export_is_recorded_and_leaves_no_object(moto_stack, monkeypatch):
    agent = moto_stack.agent()
    moto_stack.say(agent["id"], "hello")

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("the table went away")

    monkeypatch.setattr(moto_stack.deps.runs, "page", broken)
    job = _export(moto_stack)
    assert job["status"] == "failed" and job["error"]["code"] == "internal_error" and "downloadUrl" not in job
    prefix = keys.export_prefix(tenant_key("alice"))
    listed = moto_stack.s3.list_objects_v2(Bucket=moto_stack.deps.settings.bucket_name, Prefix=prefix)
    assert listed.get("KeyCount", 0) == 0


def test_deleting_the_account_deletes_export_files_and_jobs(moto_stack):
    moto_stack.agent()
    job = _export(moto_stack)
    bob_job = _export(moto_stack, user="bob")
    gone = moto_stack.call("DELETE", "/api/me")
    assert gone.status == 200 and gone.data["deleted"]["exports"] == 1
    assert moto_stack.call("GET", f"/api/me/export/{job['id']}").status == 404
    bucket = moto_stack.deps.settings.bucket_name
    assert moto_stack.s3.list_objects_v2(Bucket=bucket, Prefix="exports/").get("KeyCount") == 1
    assert moto_stack.call("GET", f"/api/me/export/{bob_job['id']}", user="bob").data["status"] == "succeeded"


def test_an_export_finishing_after_the_account_was_deleted_removes_its_file(moto_stack):
    moto_stack.agent()
    started = moto_stack.call("POST", "/api/me/export").data
    assert moto_stack.call("DELETE", "/api/me").status == 200  # the job row goes; its message is queued
    moto_stack.drain_runs()
    assert moto_stack.s3.list_objects_v2(Bucket=moto_stack.deps.settings.bucket_name, Prefix="exports/").get("KeyCount") == 0
    assert moto_stack.call("GET", f"/api/me/export/{started['exportId']}").status == 404


def test_the_inline_export_is_deprecated_and_refuses_a_large_account(moto_stack, monkeypatch):
    agent = moto_stack.agent()
    moto_stack.say(agent["id"], "hello there")
    small = moto_stack.call("GET", "/api/me/export")
    assert small.status == 200 and small.headers["deprecation"] == "true"
    assert small.data["agents"][0]["sessions"][0]["messages"][0]["content"][0]["text"] == "hello there"
    monkeypatch.setattr(
        moto_stack.deps, "settings", moto_stack.deps.settings.model_copy(update={"inline_export_max_bytes": 1000})
    )
    big = moto_stack.call("GET", "/api/me/export")
    assert big.status == 413 and big.error["code"] == "export_too_large" and "POST /api/me/export" in big.error["message"]


# --- run retention --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "result", "expires"),
    [
        ("heartbeat", {"text": "all quiet"}, True),
        ("chat", None, True),
        ("heartbeat", {"card": {"title": "Buy"}, "cardType": "decision"}, False),
        ("manual", None, False),
        ("reexamination", None, False),
    ],
)
def test_routine_runs_without_a_card_expire_after_the_retention(moto_stack, kind, result, expires):
    deps, t = moto_stack.deps, tenant_key("alice")
    created = "2026-01-01T00:00:00.000Z"
    deps.runs.put(t, Run(id="run_1", created_at=created, updated_at=created, agent_id="a1", kind=kind, result=result))
    item = deps.table.get(keys.tenant_pk(t), keys.run_sk("run_1"))
    expected = _epoch(created) + deps.settings.run_retention_days * 86400 if expires else None
    assert item.get("expiresAt") == expected
    assert deps.settings.run_retention_days == 90


def test_a_heartbeat_run_is_written_with_its_expiry_and_keeps_it_when_it_ends(moto_stack):
    agent = moto_stack.agent(schedule="rate(1 hour)", defaultPrompt="Check in.")
    moto_stack.fire(agent["id"])
    run = moto_stack.runs(agent["id"])[0]
    assert run["kind"] == "heartbeat" and run["status"] == "succeeded"
    item = moto_stack.deps.table.get(keys.tenant_pk(tenant_key("alice")), keys.run_sk(run["id"]))
    assert item["expiresAt"] == int(_epoch(run["createdAt"])) + 90 * 86400
