"""Client-side payload encryption: AES-256-GCM, one random 96-bit nonce per message.

Layout of an encrypted payload: ``nonce (12 bytes) || ciphertext || tag (16 bytes)``, the
layout of the Iggy SDKs' AES-256-GCM encryptor, so either side can read the other's
payloads given the same 32-byte key. Only payloads are encrypted (headers stay clear).
"""

from __future__ import annotations

import base64
import os

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16


class Encryptor:
    """``Encryptor(key)`` with a 32-byte key (bytes, or a base64 string of 32 bytes)."""

    def __init__(self, key: bytes | str) -> None:
        """Raises IggyError INVALID_ENCRYPTION_KEY for a key that is not 32 bytes, and
        ImportError when the ``cryptography`` package is missing."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        raw = base64.b64decode(key) if isinstance(key, str) else bytes(key)
        if len(raw) != KEY_BYTES:
            raise IggyError(ErrorCode.INVALID_ENCRYPTION_KEY, f"key has {len(raw)} bytes, need 32")
        self._aead = AESGCM(raw)

    @staticmethod
    def generate_key() -> bytes:
        return os.urandom(KEY_BYTES)

    def encrypt(self, payload: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, bytes(payload), None)

    def decrypt(self, data: bytes) -> bytes:
        """Raises IggyError CANNOT_DECRYPT_DATA for a short or tampered payload / wrong key."""
        from cryptography.exceptions import InvalidTag

        if len(data) < NONCE_BYTES + TAG_BYTES:
            raise IggyError(ErrorCode.CANNOT_DECRYPT_DATA, f"payload of {len(data)} bytes")
        view = memoryview(data)
        try:
            return self._aead.decrypt(view[:NONCE_BYTES], view[NONCE_BYTES:], None)
        except InvalidTag:
            raise IggyError(ErrorCode.CANNOT_DECRYPT_DATA, "authentication failed") from None
