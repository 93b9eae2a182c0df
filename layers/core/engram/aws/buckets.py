"""The state bucket: one lazily created S3 client per store, and prefix deletion."""

from __future__ import annotations

from typing import Any

from engram.aws.clients import make_client


class Bucket:
    """Base of the stores that keep objects in the bucket (transcripts, account exports)."""

    def __init__(self, bucket: str, client: object = None, **client_options: Any):
        self.bucket = bucket
        self._client = client
        self._client_options = client_options

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("s3", **self._client_options)
        return self._client

    def delete_prefix(self, prefix: str) -> int:
        """Removes every object under `prefix`; returns how many."""
        deleted = 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
                deleted += len(objects)
        return deleted
