"""Export objects in S3 (`exports/<tenant>/<exportId>.jsonl`): written as JSON Lines in parts, so
a worker holds at most one part in memory; read by the caller through a presigned URL."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engram.aws.buckets import Bucket
from engram.kernel.observability import logger

CONTENT_TYPE = "application/x-ndjson"


class JsonLinesUpload:
    """One object, one JSON record per line. Lines collect in a buffer; every `part_bytes` the
    buffer becomes a part of a multipart upload. An export smaller than one part is one PUT."""

    def __init__(self, client: Any, bucket: str, key: str, *, part_bytes: int):
        self.client, self.bucket, self.key, self.part_bytes = client, bucket, key, part_bytes
        self.bytes = 0  # written (buffered or uploaded)
        self.parts = 0  # uploaded
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._etags: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, object]) -> bool:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"
        self._buffer += line
        self.bytes += len(line)
        if len(self._buffer) >= self.part_bytes:
            self._upload_part()
            return True
        return False

    def _upload_part(self) -> None:
        if self._upload_id is None:
            out = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key, ContentType=CONTENT_TYPE)
            self._upload_id = out["UploadId"]
        number = len(self._etags) + 1
        out = self.client.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, PartNumber=number, Body=self._buffer
        )
        self._etags.append({"PartNumber": number, "ETag": out["ETag"]})
        self._buffer = bytearray()  # a new one: the sent part may still be referenced (no copy was made)
        self.parts = number

    def close(self) -> None:
        """Writes the object: the last part and the completion, or one PUT for a small export."""
        if self._upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._buffer, ContentType=CONTENT_TYPE)
            self._buffer = bytearray()
            self.parts = 1
            return
        if self._buffer:
            self._upload_part()
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, MultipartUpload={"Parts": self._etags}
        )

    def abort(self) -> None:
        """Drops the parts uploaded so far (the bucket's AbortIncompleteUploads rule is the backstop)."""
        self._buffer = bytearray()
        if self._upload_id is None:
            return
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self._upload_id)
        except Exception:
            logger.exception("could not abort an export upload", extra={"key": self.key})


class ExportObjectRepository(Bucket):
    def __init__(self, bucket: str, client: object = None):
        # Signature V4 presigned URLs (botocore may otherwise presign with the deprecated V2).
        super().__init__(bucket, client, signature_version="s3v4")

    def writer(self, key: str, *, part_bytes: int) -> JsonLinesUpload:
        return JsonLinesUpload(self.client, self.bucket, key, part_bytes=part_bytes)

    def download_url(self, key: str, *, filename: str, expires_s: int) -> str:
        """A presigned GET of the object (signed locally: no AWS call)."""
        return str(
            self.client.generate_presigned_url(
                ClientMethod="get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": key,
                    "ResponseContentDisposition": f'attachment; filename="{filename}"',
                    "ResponseContentType": CONTENT_TYPE,
                },
                ExpiresIn=expires_s,
            )
        )

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)
