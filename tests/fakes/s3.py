"""An in-memory S3 client: buckets and objects, with the conditional writes the transcripts rely on.

Why a fake and not moto here: a behaviour test saves and loads transcripts many times per turn;
this answers in microseconds, with the same parameter validation (botocore's own, from the service
model), the same exception classes (`client.exceptions.NoSuchKey`...) and the same paginators as a
real client. What it models, like S3 (checked against moto by tests/contract):

- objects: PutObject (Body bytes/str/file, ContentType, Metadata; If-None-Match "*" -> 412 when the
  key exists; If-Match -> 412 when the ETag differs, 404 NoSuchKey when there is no object, as S3
  and moto answer), GetObject (NoSuchKey), HeadObject (code "404"), DeleteObject (no error when
  missing), DeleteObjects (Quiet), ListObjectsV2 (Prefix, Delimiter, MaxKeys, StartAfter,
  ContinuationToken) and its paginator. ETags are the quoted MD5 of the body (single-part uploads).
- buckets: CreateBucket, HeadBucket, ListBuckets, DeleteBucket (BucketNotEmpty), and the settings
  local/resources.py applies (encryption, public access block, ownership, versioning, lifecycle,
  policy), stored and returned; NoSuchBucket for an unknown bucket.

Not modelled: versions, multipart uploads, ranges and conditional reads (NotImplementedError), ACLs,
checksums, storage classes.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError
from botocore.model import ServiceModel
from botocore.response import StreamingBody

from tests.fakes import client_error
from tests.fakes._botocore import FakeClient, service
from tests.fakes._botocore import ok as _ok

SERVICE = "s3"
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_MAX_KEYS = 1000


# --------------------------------------------------------------------------- botocore's view of the service
def _model() -> tuple[ServiceModel, Any, dict[str, Any]]:
    return service(SERVICE)


def _error(operation: str, code: str, message: str, *, status: int, **error_fields: Any) -> ClientError:
    """The ClientError botocore would raise: the modelled class for `code` (NoSuchKey...) when there is one."""
    err = client_error(operation, code, message, status=status)
    err.response["Error"].update(error_fields)
    cls = _model()[1].from_code(code)
    return cls(err.response, operation) if cls is not ClientError else err


# --------------------------------------------------------------------------- state
@dataclass
class _Object:
    data: bytes
    etag: str
    content_type: str
    metadata: dict[str, str]
    last_modified: datetime


@dataclass
class _Bucket:
    name: str
    created: datetime
    objects: dict[str, _Object] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # encryption, public access block...


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    data = body.read()  # a file-like object, as boto3 accepts
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _unquote(etag: str) -> str:
    return etag.strip().strip('"')


def _token(marker: str) -> str:
    return base64.urlsafe_b64encode(marker.encode("utf-8")).decode("ascii")


class FakeS3(FakeClient):
    SERVICE = SERVICE

    """What `boto3.client("s3")` returns inside `fake_aws()`. Thread-safe (one lock)."""

    def __init__(self, region: str = "us-east-1"):
        super().__init__(region)
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ client plumbing
    def _bucket(self, operation: str, name: str) -> _Bucket:
        bucket = self._buckets.get(name)
        if bucket is None:
            raise _error(operation, "NoSuchBucket", "The specified bucket does not exist", status=404, BucketName=name)
        return bucket

    # ------------------------------------------------------------------ buckets
    def create_bucket(self, **params: Any) -> dict[str, Any]:
        self._validate("CreateBucket", params)
        name = params["Bucket"]
        location = params.get("CreateBucketConfiguration", {}).get("LocationConstraint")
        if not _BUCKET_NAME.match(name) or ".." in name:
            raise _error("CreateBucket", "InvalidBucketName", "The specified bucket is not valid.", status=400, BucketName=name)
        if self.region == "us-east-1" and location not in (None, ""):
            raise _error(
                "CreateBucket",
                "InvalidLocationConstraint",
                "The specified location-constraint is not valid",
                status=400,
                LocationConstraint=location,
            )
        if self.region != "us-east-1" and location != self.region:
            raise _error(
                "CreateBucket",
                "IllegalLocationConstraintException",
                f"The {location or 'unspecified'} location constraint is incompatible for the region specific endpoint "
                "this request was sent to.",
                status=400,
            )
        with self._lock:
            if name in self._buckets:
                if self.region != "us-east-1":  # us-east-1 answers 200 to its owner, for legacy reasons
                    raise _error(
                        "CreateBucket",
                        "BucketAlreadyOwnedByYou",
                        "Your previous request to create the named bucket succeeded and you already own it.",
                        status=409,
                        BucketName=name,
                    )
            else:
                self._buckets[name] = _Bucket(name, datetime.now(UTC))
        return _ok({"Location": f"/{name}"})

    def head_bucket(self, **params: Any) -> dict[str, Any]:
        self._validate("HeadBucket", params)
        with self._lock:
            if params["Bucket"] not in self._buckets:
                raise _error("HeadBucket", "404", "Not Found", status=404)
        return _ok({"BucketRegion": self.region})

    def list_buckets(self, **params: Any) -> dict[str, Any]:
        self._validate("ListBuckets", params)
        with self._lock:
            buckets = [{"Name": b.name, "CreationDate": b.created} for b in sorted(self._buckets.values(), key=lambda b: b.name)]
        return _ok({"Buckets": buckets, "Owner": {"ID": "fake-owner"}})

    def delete_bucket(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteBucket", params)
        with self._lock:
            bucket = self._bucket("DeleteBucket", params["Bucket"])
            if bucket.objects:
                raise _error(
                    "DeleteBucket",
                    "BucketNotEmpty",
                    "The bucket you tried to delete is not empty",
                    status=409,
                    BucketName=bucket.name,
                )
            del self._buckets[bucket.name]
        return _ok({}, 204)

    def _put_setting(self, operation: str, params: dict[str, Any], key: str) -> dict[str, Any]:
        self._validate(operation, params)
        with self._lock:
            self._bucket(operation, params["Bucket"]).settings[key] = copy.deepcopy(params[key])
        return _ok({})

    def _get_setting(self, operation: str, params: dict[str, Any], key: str, default: Any = None, *, missing: str = "") -> Any:
        self._validate(operation, params)
        with self._lock:
            bucket = self._bucket(operation, params["Bucket"])
            value = bucket.settings.get(key, default)
        if value is None:
            raise _error(operation, missing, f"The {key} was not found", status=404, BucketName=bucket.name)
        return copy.deepcopy(value)

    def put_bucket_encryption(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutBucketEncryption", params, "ServerSideEncryptionConfiguration")

    def get_bucket_encryption(self, **params: Any) -> dict[str, Any]:
        # Every bucket has had SSE-S3 by default since January 2023 (moto answers
        # ServerSideEncryptionConfigurationNotFoundError instead).
        default = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": False}]}
        config = self._get_setting("GetBucketEncryption", params, "ServerSideEncryptionConfiguration", default)
        return _ok({"ServerSideEncryptionConfiguration": config})

    def put_public_access_block(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutPublicAccessBlock", params, "PublicAccessBlockConfiguration")

    def get_public_access_block(self, **params: Any) -> dict[str, Any]:
        # New buckets have blocked public access by default since April 2023 (moto answers
        # NoSuchPublicAccessBlockConfiguration instead).
        default = dict.fromkeys(("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"), True)
        config = self._get_setting("GetPublicAccessBlock", params, "PublicAccessBlockConfiguration", default)
        return _ok({"PublicAccessBlockConfiguration": config})

    def put_bucket_ownership_controls(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutBucketOwnershipControls", params, "OwnershipControls")

    def get_bucket_ownership_controls(self, **params: Any) -> dict[str, Any]:
        config = self._get_setting(
            "GetBucketOwnershipControls", params, "OwnershipControls", missing="OwnershipControlsNotFoundError"
        )
        return _ok({"OwnershipControls": config})

    def put_bucket_versioning(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutBucketVersioning", params, "VersioningConfiguration")

    def get_bucket_versioning(self, **params: Any) -> dict[str, Any]:
        config = self._get_setting("GetBucketVersioning", params, "VersioningConfiguration", {})
        return _ok({k: v for k, v in config.items() if k in ("Status", "MFADelete")})

    def put_bucket_lifecycle_configuration(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutBucketLifecycleConfiguration", params, "LifecycleConfiguration")

    def put_bucket_policy(self, **params: Any) -> dict[str, Any]:
        return self._put_setting("PutBucketPolicy", params, "Policy")

    # ------------------------------------------------------------------ objects
    def put_object(self, **params: Any) -> dict[str, Any]:
        self._validate("PutObject", params)
        data = _body_bytes(params.get("Body"))
        etag = f'"{hashlib.md5(data).hexdigest()}"'
        if_match, if_none_match = params.get("IfMatch"), params.get("IfNoneMatch")
        if if_none_match is not None and if_none_match != "*":
            raise _error(
                "PutObject", "NotImplemented", "A header you provided implies functionality that is not implemented", status=501
            )
        with self._lock:
            bucket = self._bucket("PutObject", params["Bucket"])
            key = params["Key"]
            current = bucket.objects.get(key)
            if if_none_match == "*" and current is not None:
                raise _error(
                    "PutObject",
                    "PreconditionFailed",
                    "At least one of the pre-conditions you specified did not hold",
                    status=412,
                    Condition="If-None-Match",
                )
            if if_match is not None:
                if current is None:  # S3 (and moto) answer 404 here, not 412
                    raise _error("PutObject", "NoSuchKey", "The specified key does not exist.", status=404, Key=key)
                if _unquote(if_match) != _unquote(current.etag):
                    raise _error(
                        "PutObject",
                        "PreconditionFailed",
                        "At least one of the pre-conditions you specified did not hold",
                        status=412,
                        Condition="If-Match",
                    )
            bucket.objects[key] = _Object(
                data=data,
                etag=etag,
                content_type=params.get("ContentType") or "binary/octet-stream",
                metadata={k.lower(): v for k, v in params.get("Metadata", {}).items()},
                last_modified=datetime.now(UTC).replace(microsecond=0),
            )
        return _ok({"ETag": etag})

    def _object(self, operation: str, params: dict[str, Any], missing: tuple[str, str]) -> _Object:
        bucket = self._bucket(operation, params["Bucket"])
        found = bucket.objects.get(params["Key"])
        if found is None:
            code, message = missing
            raise _error(operation, code, message, status=404, **({"Key": params["Key"]} if code == "NoSuchKey" else {}))
        return found

    @staticmethod
    def _unmodelled(method: str, params: dict[str, Any]) -> None:
        """Fails loudly rather than ignore a read option that would change the answer."""
        for name in ("Range", "PartNumber", "VersionId", "IfMatch", "IfNoneMatch", "IfModifiedSince", "IfUnmodifiedSince"):
            if name in params:
                raise NotImplementedError(f"FakeS3.{method} does not model {name}")

    @staticmethod
    def _head(obj: _Object) -> dict[str, Any]:
        return {
            "AcceptRanges": "bytes",
            "LastModified": obj.last_modified,
            "ContentLength": len(obj.data),
            "ETag": obj.etag,
            "ContentType": obj.content_type,
            "Metadata": dict(obj.metadata),
        }

    def get_object(self, **params: Any) -> dict[str, Any]:
        self._validate("GetObject", params)
        self._unmodelled("get_object", params)
        with self._lock:
            obj = self._object("GetObject", params, ("NoSuchKey", "The specified key does not exist."))
        return _ok({**self._head(obj), "Body": StreamingBody(io.BytesIO(obj.data), len(obj.data))})

    def head_object(self, **params: Any) -> dict[str, Any]:
        self._validate("HeadObject", params)
        self._unmodelled("head_object", params)
        with self._lock:  # a HEAD response has no body, so no error code but the status
            obj = self._object("HeadObject", params, ("404", "Not Found"))
        return _ok(self._head(obj))

    def delete_object(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteObject", params)
        with self._lock:
            self._bucket("DeleteObject", params["Bucket"]).objects.pop(params["Key"], None)
        return _ok({}, 204)

    def delete_objects(self, **params: Any) -> dict[str, Any]:
        self._validate("DeleteObjects", params)
        request = params["Delete"]
        keys = [o["Key"] for o in request["Objects"]]
        if not keys or len(keys) > _MAX_KEYS:
            raise _error(
                "DeleteObjects",
                "MalformedXML",
                "The XML you provided was not well-formed or did not validate against our published schema",
                status=400,
            )
        with self._lock:
            bucket = self._bucket("DeleteObjects", params["Bucket"])
            for key in keys:
                bucket.objects.pop(key, None)
        # Quiet mode reports only errors (moto lists the deleted keys either way).
        return _ok({} if request.get("Quiet") else {"Deleted": [{"Key": k} for k in keys]})

    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        self._validate("ListObjectsV2", params)
        prefix, delimiter = params.get("Prefix", ""), params.get("Delimiter", "")
        max_keys = min(int(params.get("MaxKeys", _MAX_KEYS)), _MAX_KEYS)
        after, after_is_prefix = params.get("StartAfter", ""), False
        if "ContinuationToken" in params:
            try:
                marker = json.loads(base64.urlsafe_b64decode(params["ContinuationToken"].encode("ascii")))
                after, after_is_prefix = str(marker["after"]), bool(marker["prefix"])
            except (ValueError, KeyError, TypeError):
                raise _error(
                    "ListObjectsV2", "InvalidArgument", "The continuation token provided is incorrect", status=400
                ) from None
        with self._lock:
            bucket = self._bucket("ListObjectsV2", params["Bucket"])
            candidates = sorted(
                (k, o) for k, o in bucket.objects.items() if k.startswith(prefix) and k > after
            )  # UTF-8 byte order is code point order
        contents: list[dict[str, Any]] = []
        prefixes: list[str] = []
        truncated, last, last_is_prefix = False, "", False
        for key, obj in candidates:
            if after_is_prefix and key.startswith(after):
                continue  # the rest of a common prefix the previous page ended on
            rest = key[len(prefix) :]
            common = prefix + rest[: rest.index(delimiter) + len(delimiter)] if delimiter and delimiter in rest else None
            if common is not None and prefixes and prefixes[-1] == common:
                continue
            if len(contents) + len(prefixes) >= max_keys:
                truncated = True
                break
            if common is not None:
                prefixes.append(common)
                last, last_is_prefix = common, True
            else:
                contents.append(
                    {
                        "Key": key,
                        "LastModified": obj.last_modified,
                        "ETag": obj.etag,
                        "Size": len(obj.data),
                        "StorageClass": "STANDARD",
                    }
                )
                last, last_is_prefix = key, False
        out: dict[str, Any] = {"IsTruncated": truncated, "Name": bucket.name, "Prefix": prefix, "MaxKeys": max_keys}
        if contents:
            out["Contents"] = contents
        if delimiter:
            out["Delimiter"] = delimiter
        if prefixes:
            out["CommonPrefixes"] = [{"Prefix": p} for p in prefixes]
        out["KeyCount"] = len(contents) + len(prefixes)
        for echoed in ("ContinuationToken", "StartAfter"):
            if echoed in params:
                out[echoed] = params[echoed]
        if truncated:
            out["NextContinuationToken"] = _token(json.dumps({"after": last, "prefix": last_is_prefix}))
        return _ok(out)
