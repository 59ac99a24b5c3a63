"""``Partitioning`` of SendMessages: ``kind u8, length u8, value[length]``.

Kinds: 1 balanced (length 0), 2 partition id (length 4, u32), 3 messages key (raw bytes).
Decode follows the 0.8 server's TCP path: every malformed form (unknown kind, balanced with
a value, partition id not 4 bytes, truncated value) is INVALID_COMMAND, and a zero-length
messages key is accepted there. The ``messages_key`` constructor enforces 1..255 bytes with
INVALID_KEY_VALUE_LENGTH (the HTTP rule) for values built locally.
"""

from __future__ import annotations

import enum
from typing import Self

from lurcher.core.wire.buffer import U32, Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError

MAX_MESSAGES_KEY_BYTES = 255


class PartitioningKind(enum.IntEnum):
    BALANCED = 1
    PARTITION_ID = 2
    MESSAGES_KEY = 3


_FIXED_LENGTH = {PartitioningKind.BALANCED: 0, PartitioningKind.PARTITION_ID: 4}


class Partitioning(WireStruct, frozen=True):
    kind: int
    value: bytes = b""

    @classmethod
    def balanced(cls) -> "Partitioning":
        return cls(PartitioningKind.BALANCED)

    @classmethod
    def partition(cls, partition_id: int) -> "Partitioning":
        return cls(PartitioningKind.PARTITION_ID, U32.pack(partition_id))

    @classmethod
    def messages_key(cls, key: bytes | str) -> "Partitioning":
        """Raises IggyError INVALID_KEY_VALUE_LENGTH unless the key has 1..255 bytes."""
        raw = key.encode() if isinstance(key, str) else bytes(key)
        if not 1 <= len(raw) <= MAX_MESSAGES_KEY_BYTES:
            raise IggyError(ErrorCode.INVALID_KEY_VALUE_LENGTH, f"messages key of {len(raw)} bytes")
        return cls(PartitioningKind.MESSAGES_KEY, raw)

    @property
    def partition_id(self) -> int | None:
        """The explicit partition id, or None for the other kinds."""
        if self.kind == PartitioningKind.PARTITION_ID:
            return U32.unpack(self.value)[0]
        return None

    def write(self, w: Writer) -> None:
        w.u8(self.kind).name(self.value)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Raises WireError, always with INVALID_COMMAND."""
        start = r.pos
        kind = r.u8("partitioning kind")
        length = r.u8("partitioning length")
        if kind not in (1, 2, 3):
            raise _bad(f"partitioning kind {kind}", start)
        expected = _FIXED_LENGTH.get(PartitioningKind(kind))
        if expected is not None and length != expected:
            raise _bad(f"partitioning kind {kind} with length {length}", start)
        return cls(kind, r.bytes(length, "partitioning value"))


def _bad(detail: str, offset: int) -> WireError:
    return WireError(detail, offset=offset, code=ErrorCode.INVALID_COMMAND)
