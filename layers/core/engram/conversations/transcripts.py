"""Session transcripts in S3: one JSON object per session, written only with a matching ETag.

The transcript is written before the turn's DynamoDB commit, so an object can hold a turn that
never committed (the commit failed, and nothing may be able to undo the write). The session row
is the truth: its `lastRunId` names the run whose commit the transcript reflects. Every object
names the run that wrote it and carries what it replaced (`base`: the messages trimmed away
from the previous transcript, and how many of its own leading messages the previous one had), so
a reader given the committed run id reads the committed transcript from either object; the next
turn writes over an uncommitted one (its If-Match is the object's ETag as it is).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from engram.aws import clients as aws_clients
from engram.aws import keys
from engram.aws.buckets import Bucket
from engram.conversations.models import History
from engram.kernel.errors import SessionBusy
from engram.kernel.observability import logger

_VERSION = 2  # 1: {"messages"} only, written before transcripts named their run (always committed)


def _base(previous: History, messages: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """How to get `previous` back from `messages`: normally the new list starts with the tail
    of the previous one (trimming drops from the front), so only the dropped head is kept."""
    old = previous.messages
    for dropped in range(len(old) + 1):
        kept = len(old) - dropped
        if messages[:kept] == old[dropped:]:
            return {"runId": previous.run_id, "dropped": old[:dropped], "kept": kept}
    return {"runId": previous.run_id, "messages": old}  # a trimming notice was inserted: keep it all


def committed_view(doc: dict[str, Any], etag: str | None, committed_run: str | None) -> History:
    """The committed transcript in a stored document, given the session's `lastRunId`."""
    writer = doc.get("runId")
    messages = list(doc.get("messages", []))
    cut = doc.get("cut") or {}
    pending, pending_from = list(cut.get("messages") or []), int(cut.get("from", 0) or 0)
    if writer is None or writer == committed_run:
        return History(messages=messages, etag=etag, run_id=writer, cut=pending, cut_from=pending_from)
    base = doc.get("base") or {}
    if base.get("runId") != committed_run:
        logger.warning("a transcript names neither the committed run nor its base", extra={"writer": writer})
    previous = base["messages"] if "messages" in base else list(base.get("dropped", [])) + messages[: int(base.get("kept", 0))]
    return History(messages=previous, etag=etag, run_id=base.get("runId"), cut=pending, cut_from=pending_from)


class HistoryRepository(Bucket):
    def load(self, tenant: str, agent_id: str, session_id: str, *, committed_run: str | None) -> History:
        """The transcript as of the session's committed run (`lastRunId` of the session row)."""
        try:
            out = self.client.get_object(Bucket=self.bucket, Key=keys.session_object(tenant, agent_id, session_id))
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return History(messages=[], etag=None)
            raise
        return committed_view(json.loads(out["Body"].read()), out["ETag"], committed_run)

    def save(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        messages: Sequence[Mapping[str, object]],
        *,
        previous: History,
        run_id: str,
        cut: list[Any] | None = None,
        cut_from: int = 0,
    ) -> str:
        """Conditional PUT over the object the turn read (If-Match its ETag; If-None-Match for a
        new one). A mismatch means someone else wrote the session since: SessionBusy.

        A retry after a lost response finds its own write and fails the condition: the object's
        `run-id` metadata tells, and the write stands."""
        doc: dict[str, Any] = {"version": _VERSION, "runId": run_id, "messages": messages, "base": _base(previous, messages)}
        if cut:
            doc["cut"] = {"from": cut_from, "messages": cut}
        body = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
        key = keys.session_object(tenant, agent_id, session_id)
        condition = {"IfMatch": previous.etag} if previous.etag else {"IfNoneMatch": "*"}
        try:
            out = self.client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json", Metadata={"run-id": run_id}, **condition
            )
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
            written = self._written_by(key, run_id)
            if written is None:
                raise SessionBusy("the session changed while the turn ran", field="sessionId") from None
            return written
        return str(out["ETag"])

    def _written_by(self, key: str, run_id: str) -> str | None:
        """The object's ETag if `run_id` wrote it (else None)."""
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except aws_clients.ClientError:
            return None
        return str(head["ETag"]) if head.get("Metadata", {}).get("run-id") == run_id else None

    def delete(self, tenant: str, agent_id: str, session_id: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=keys.session_object(tenant, agent_id, session_id))

    def delete_agent(self, tenant: str, agent_id: str) -> int:
        """Removes every transcript of an agent (all its sessions, and its kept tool results); returns how many."""
        return self.delete_prefix(keys.session_prefix(tenant, agent_id))

    def put_tool_result(self, tenant: str, agent_id: str, run_id: str, tool_use_id: str, result: Mapping[str, object]) -> None:
        body = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.client.put_object(
            Bucket=self.bucket,
            Key=keys.tool_result_object(tenant, agent_id, run_id, tool_use_id),
            Body=body,
            ContentType="application/json",
        )

    def tool_results(self, tenant: str, agent_id: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Every kept full tool result of an agent: (run id, tool_use id, result)."""
        prefix = f"{keys.session_prefix(tenant, agent_id)}tool-results/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                run_id, _, name = obj["Key"][len(prefix) :].partition("/")
                found = self.get_tool_result(tenant, agent_id, run_id, name.removesuffix(".json"))
                if found is not None:
                    yield run_id, name.removesuffix(".json"), found

    def get_tool_result(self, tenant: str, agent_id: str, run_id: str, tool_use_id: str) -> dict[str, object] | None:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=keys.tool_result_object(tenant, agent_id, run_id, tool_use_id))
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        value = json.loads(obj["Body"].read())
        return value if isinstance(value, dict) else None
