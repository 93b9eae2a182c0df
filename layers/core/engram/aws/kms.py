"""Small secrets kept in the table, encrypted with the stack's KMS key (a connection's auth value).

The tenant and the row the value belongs to are bound in as KMS encryption context: a ciphertext
copied to another tenant's row, or another connection, does not decrypt. The api function may only
Encrypt, the functions that call tools may only Decrypt (template.yaml).
"""

from __future__ import annotations

import base64
from typing import Any

from botocore.exceptions import ClientError

from engram.aws.clients import make_client
from engram.kernel.errors import StorageUnavailable


class SealedValueUnreadable(Exception):
    """A sealed value that KMS will not open for this tenant and row (tampered, moved, or the key gone)."""


class KmsSecretBox:
    def __init__(self, key_id: str, client: object = None):
        self.key_id = key_id
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("kms")
        return self._client

    def seal(self, plaintext: str, context: dict[str, str]) -> str:
        if not self.key_id:
            raise StorageUnavailable("no KMS key is configured for connection secrets (CONNECTION_KEY_ID)")
        out = self.client.encrypt(KeyId=self.key_id, Plaintext=plaintext.encode("utf-8"), EncryptionContext=context)
        return base64.b64encode(out["CiphertextBlob"]).decode("ascii")

    def open(self, sealed: str, context: dict[str, str]) -> str:
        try:
            key = {"KeyId": self.key_id} if self.key_id else {}
            out = self.client.decrypt(CiphertextBlob=base64.b64decode(sealed), EncryptionContext=context, **key)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("InvalidCiphertextException", "IncorrectKeyException", "NotFoundException", "DisabledException"):
                raise SealedValueUnreadable(code) from None
            raise
        return bytes(out["Plaintext"]).decode("utf-8")
