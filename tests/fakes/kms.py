"""An in-memory KMS client: CreateKey, Encrypt, Decrypt, with encryption context bound in.

Why: connections seal their auth header value with KMS (engram.aws.kms), binding the tenant and
the connection as encryption context. Like the service (checked against moto by
tests/contract/test_connections_contract.py): a ciphertext opens only with the key it was sealed
with and the same context (else InvalidCiphertextException), an unknown key is NotFoundException,
and a ciphertext is opaque bytes that never contain the plaintext.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from typing import Any

from tests.fakes._botocore import FakeClient, modelled_error, ok

SERVICE = "kms"
ACCOUNT_ID = "123456789012"


class FakeKMS(FakeClient):
    SERVICE = SERVICE

    def __init__(self, region: str = "us-east-1"):
        super().__init__(region)
        self._lock = threading.Lock()
        self._keys: dict[str, bytes] = {}
        self._sealed: dict[bytes, tuple[str, str, bytes]] = {}  # ciphertext -> (key, context digest, plaintext)

    def _key_id(self, key: str, operation: str) -> str:
        key_id = key.rsplit("/", 1)[-1]
        if key_id not in self._keys:
            raise modelled_error(SERVICE, operation, "NotFoundException", f"Key '{key}' does not exist", status=400)
        return key_id

    def create_key(self, **params: Any) -> dict[str, Any]:
        self._validate("CreateKey", params)
        key_id = str(uuid.uuid4())
        with self._lock:
            self._keys[key_id] = os.urandom(32)
        arn = f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{key_id}"
        return ok({"KeyMetadata": {"KeyId": key_id, "Arn": arn, "Enabled": True, "Description": params.get("Description", "")}})

    @staticmethod
    def _context(params: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(params.get("EncryptionContext") or {}, sort_keys=True).encode()).hexdigest()

    def encrypt(self, **params: Any) -> dict[str, Any]:
        self._validate("Encrypt", params)
        key_id = self._key_id(params["KeyId"], "Encrypt")
        blob = os.urandom(16) + hashlib.sha256(self._keys[key_id] + os.urandom(16)).digest()
        with self._lock:
            self._sealed[blob] = (key_id, self._context(params), bytes(params["Plaintext"]))
        return ok({"CiphertextBlob": blob, "KeyId": f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{key_id}"})

    def decrypt(self, **params: Any) -> dict[str, Any]:
        self._validate("Decrypt", params)
        with self._lock:
            sealed = self._sealed.get(bytes(params["CiphertextBlob"]))
        wanted_key = self._key_id(params["KeyId"], "Decrypt") if params.get("KeyId") else None
        if sealed is None or sealed[1] != self._context(params) or (wanted_key and wanted_key != sealed[0]):
            raise modelled_error(SERVICE, "Decrypt", "InvalidCiphertextException", "", status=400)
        return ok({"Plaintext": sealed[2], "KeyId": f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{sealed[0]}"})
