"""Session transcripts in S3: one JSON object per session, written only with a matching ETag."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from engram.aws import keys
from engram.aws.clients import make_client
from engram.conversations.models import History
from engram.kernel.errors import SessionBusy
from engram.kernel.observability import logger


class HistoryStore:
    def __init__(self, bucket: str, client: Any = None):
        self.bucket = bucket
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("s3")
        return self._client

    def load(self, t: str, agent_id: str, session_id: str) -> History:
        try:
            out = self.client.get_object(Bucket=self.bucket, Key=keys.session_object(t, agent_id, session_id))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return History(messages=[], etag=None)
            raise
        doc = json.loads(out["Body"].read())
        return History(messages=doc.get("messages", []), etag=out["ETag"])

    def save(self, t: str, agent_id: str, session_id: str, messages: list[dict[str, Any]], *, etag: str | None) -> str:
        """Conditional PUT: If-Match the version the turn read (If-None-Match for a new object).

        A mismatch means someone else wrote the session since: the turn must not overwrite it.
        """
        body = json.dumps({"version": 1, "messages": messages}, ensure_ascii=False, separators=(",", ":")).encode()
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            out = self.client.put_object(
                Bucket=self.bucket,
                Key=keys.session_object(t, agent_id, session_id),
                Body=body,
                ContentType="application/json",
                **condition,
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise SessionBusy("the session changed while the turn ran", field="sessionId") from None
            raise
        return str(out["ETag"])

    def restore(self, t: str, agent_id: str, session_id: str, previous: History, *, written_etag: str) -> None:
        """Undoes our own write (only if nobody wrote since): the previous transcript, or no object."""
        key = keys.session_object(t, agent_id, session_id)
        try:
            if previous.etag is None:
                current = self.client.head_object(Bucket=self.bucket, Key=key)
                if current["ETag"] == written_etag:
                    self.client.delete_object(Bucket=self.bucket, Key=key)
            else:
                self.save(t, agent_id, session_id, previous.messages, etag=written_etag)
        except Exception:  # best-effort: the failed run is still recorded by the caller
            logger.exception("could not restore the transcript after a failed commit", extra={"key": key})

    def delete(self, t: str, agent_id: str, session_id: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=keys.session_object(t, agent_id, session_id))

    def delete_agent(self, t: str, agent_id: str) -> int:
        """Removes every transcript of an agent (all its sessions); returns how many."""
        prefix = keys.session_prefix(t, agent_id)
        deleted = 0
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
                deleted += len(objects)
        return deleted
