"""Handlers against moto, with the table, bucket and queues created from template.yaml itself."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from engram.conversations.webhooks import sign
from engram.kernel.settings import get_settings
from engram.roots import heartbeat
from engram.wiring.model import ModelDeps
from local.apigw import invoke_http, load_functions
from local.resources import create_resources
from local.template import load_template
from tests.fakes import fake_aws

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
_FUNCTIONS: list[Any] = []  # handler modules load once per test session


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def data(self) -> Any:
        return self.body.get("data")

    @property
    def error(self) -> dict[str, Any]:
        return self.body.get("error") or {}


class Stack:
    def __init__(self, resources: Any, deps: ModelDeps):
        self.resources = resources
        self.deps = deps
        if not _FUNCTIONS:
            _FUNCTIONS.append(load_functions(TEMPLATE, ROOT))
        self.functions = _FUNCTIONS[0]
        # One set of dependencies for every function (the heartbeat's is a superset of the others'),
        # so a test that swaps the model or a setting reaches them all.
        self.use(deps)

    def use(self, deps: ModelDeps | None) -> None:
        for function in self.functions:
            function.prepare(lambda module, deps=deps: module.ROOT.use(deps))
        self.s3 = boto3.client("s3")
        self.sqs = boto3.client("sqs")

    def call(
        self,
        method: str,
        path: str,
        *,
        user: str | None = "alice",
        body: Any = None,
        raw: str | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        hdrs = {"content-type": "application/json", **(headers or {})}
        if user:
            hdrs["authorization"] = f"Bearer dev-{user}"
        payload = raw if raw is not None else (json.dumps(body) if body is not None else None)
        status, out_headers, out_body = invoke_http(self.functions, method, path, body=payload, headers=hdrs, query=query)
        parsed = json.loads(out_body) if out_body else {}
        return Reply(status, parsed, dict(out_headers))

    # conveniences -------------------------------------------------------------------------
    def agent(self, user: str = "alice", **fields: Any) -> dict[str, Any]:
        r = self.call("POST", "/api/agents", user=user, body={"name": "Ada", "persona": "You help.", **fields})
        assert r.status == 201, r.body
        return r.data

    def say(self, agent_id: str, message: str, *, session: str = "dashboard", user: str = "alice") -> Reply:
        return self.call("POST", f"/api/agents/{agent_id}/sessions/{session}/messages", user=user, body={"message": message})

    def transcript_bytes(self, user: str, agent_id: str, session: str = "dashboard") -> bytes | None:
        from engram.aws.keys import session_object
        from engram.kernel.ids import tenant_key

        try:
            obj = self.s3.get_object(
                Bucket=self.deps.settings.bucket_name, Key=session_object(tenant_key(user), agent_id, session)
            )
        except self.s3.exceptions.NoSuchKey:
            return None
        return obj["Body"].read()

    def queue_messages(self, url: str) -> list[dict[str, Any]]:
        out = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        return [json.loads(m["Body"]) for m in out.get("Messages", [])]

    def drain_turns(self) -> None:
        """Feeds the FIFO turn queue to the chat function until it is empty."""
        from local.workers import Workers

        Workers(self.functions, self.resources, retry_delay=0).drain("TurnQueue", timeout=30)

    # runs (heartbeats, manual runs, re-examinations) ------------------------------------------
    def drain_runs(self) -> None:
        """Feeds the run queue to the heartbeat function until it is empty."""
        from local.workers import Workers

        Workers(self.functions, self.resources, retry_delay=0).drain("RunQueue", timeout=30)

    def fire(self, agent_id: str, when: str | None = None, user: str = "alice") -> Any:
        """One EventBridge Scheduler firing, as the schedule's Target Input delivers it (`when`:
        the scheduled time, default now; see `at`)."""
        from engram.kernel.ids import tenant_key

        when = when or at(0)
        event = {
            "source": "engram.schedule",
            "tenant": tenant_key(user),
            "agentId": agent_id,
            "scheduledTime": when,
            "executionId": "local",
            "attempt": "1",
        }
        return self.functions["HeartbeatFunction"].invoke(event)

    @staticmethod
    def at(seconds: float) -> str:
        return at(seconds)

    def runs(self, agent_id: str, user: str = "alice") -> list[dict[str, Any]]:
        r = self.call("GET", f"/api/agents/{agent_id}/runs", user=user)
        assert r.status == 200, r.body
        return r.data["items"]

    def run_now(self, agent_id: str, user: str = "alice", **body: Any) -> dict[str, Any]:
        """POST /runs, then the heartbeat function takes the job; returns the finished run."""
        r = self.call("POST", f"/api/agents/{agent_id}/runs", user=user, body=body)
        assert r.status == 202, r.body
        self.drain_runs()
        return self.call("GET", f"/api/runs/{r.data['runId']}", user=user).data

    def webhook(
        self, agent_id: str, secret: str, body: Any, *, timestamp: int | None = None, signature: str | None = None
    ) -> Reply:
        raw = json.dumps(body)
        ts = str(timestamp if timestamp is not None else int(time.time()))
        sig = signature or sign(secret, ts, raw)
        return self.call(
            "POST",
            f"/api/agents/{agent_id}/webhook",
            user=None,
            raw=raw,
            headers={"x-engram-timestamp": ts, "x-engram-signature": sig},
        )


def at(seconds: float) -> str:
    """A scheduled time `seconds` from now, as EventBridge Scheduler writes it (whole seconds,
    rounded up, so it sorts after anything that happened before the call)."""
    from datetime import datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=seconds + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stack(monkeypatch: pytest.MonkeyPatch, backend: AbstractContextManager[Any]) -> Iterator[Stack]:
    with backend:
        resources = create_resources(TEMPLATE)
        # Globals, plus ApiFunction's own variables (the schedule group, the scheduler role and
        # target) so that the API creates schedules on the backend.
        for key, value in {**resources.env(), **resources.env("ApiFunction")}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("MODEL_PROVIDER", "offline")
        monkeypatch.setenv("SESSION_WAIT_SECONDS", "0")
        get_settings.cache_clear()
        stack = Stack(resources, heartbeat.build(get_settings()))
        try:
            yield stack
        finally:
            stack.use(None)
            get_settings.cache_clear()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The handlers on the in-memory AWS fakes (tests/fakes): behaviour tests, milliseconds each.
    tests/contract keeps the fakes true to the emulator."""
    yield from _stack(monkeypatch, fake_aws())


@pytest.fixture
def moto_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The handlers on moto, for what only the emulator shows."""
    yield from _stack(monkeypatch, mock_aws())
