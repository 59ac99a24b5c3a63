"""PollMessages's answer and the typed view of one polled message.

``PolledMessages``: ``partition_id u32``, ``current_offset u64``, ``messages_count u32``
(the 16-byte prefix, always sent, even with no messages), then the messages exactly as
stored (64-byte header, payload, user headers) kept as one memoryview ``data``; no index
block. ``iter_messages`` walks ``data`` as the 0.8 SDK does: until the buffer ends,
stopping silently at a truncated tail; a header with a non-zero reserved field raises
WireError INVALID_RESERVED_FIELD. ``Message`` is for SDK use and tests, not the hot path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Self

from lurcher.core.wire.buffer import Buffer, Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError

POLL_PREFIX = struct.Struct("<IQI")
# checksum u64, id u128 (as two u64: low, high), offset, timestamp, origin_timestamp u64,
# user_headers_length u32, payload_length u32, reserved u64
MESSAGE_HEADER = struct.Struct("<QQQQQQIIQ")
assert (POLL_PREFIX.size, MESSAGE_HEADER.size) == (16, 64)
MESSAGE_HEADER_BYTES = MESSAGE_HEADER.size


class Message(WireStruct, frozen=True):
    """One message: header fields, payload, raw user-headers block."""

    checksum: int = 0
    id: int = 0
    offset: int = 0
    timestamp: int = 0
    origin_timestamp: int = 0
    payload: bytes = b""
    user_headers: bytes = b""
    reserved: int = 0

    @property
    def size_bytes(self) -> int:
        return MESSAGE_HEADER_BYTES + len(self.payload) + len(self.user_headers)

    def write(self, w: Writer) -> None:
        w.raw(MESSAGE_HEADER.pack(
            self.checksum, self.id & 0xFFFF_FFFF_FFFF_FFFF, self.id >> 64, self.offset,
            self.timestamp, self.origin_timestamp, len(self.user_headers), len(self.payload),
            self.reserved))
        w.raw(self.payload).raw(self.user_headers)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Strict form: raises WireError when truncated or reserved is non-zero."""
        start = r.need(MESSAGE_HEADER_BYTES, "message header")
        (checksum, id_lo, id_hi, offset, timestamp, origin, headers_len, payload_len,
         reserved) = MESSAGE_HEADER.unpack_from(r.buf, start)
        if reserved:
            raise WireError(f"reserved field {reserved}", offset=start + 56,
                            code=ErrorCode.INVALID_RESERVED_FIELD)
        payload = r.bytes(payload_len, "message payload")
        user_headers = r.bytes(headers_len, "message user headers")
        return cls(checksum, id_lo | id_hi << 64, offset, timestamp, origin, payload,
                   user_headers)


def iter_messages(data: Buffer) -> Iterator[Message]:
    """Messages of a poll blob; a truncated tail ends iteration silently (SDK behaviour).

    Raises WireError INVALID_RESERVED_FIELD for a header whose reserved field is non-zero.
    """
    r = Reader(data)
    while r.remaining >= MESSAGE_HEADER_BYTES:
        body = MESSAGE_HEADER.unpack_from(r.buf, r.pos)
        if MESSAGE_HEADER_BYTES + body[6] + body[7] > r.remaining:
            return
        yield Message.read(r)


class PolledMessages(WireStruct, frozen=True):
    partition_id: int
    current_offset: int
    messages_count: int
    data: memoryview | bytes = b""

    @classmethod
    def of(cls, partition_id: int, current_offset: int,
           messages: list[Message]) -> "PolledMessages":
        """Build from typed messages (count derived); for tests and small answers."""
        return cls(partition_id, current_offset, len(messages), Message.encode_list(messages))

    def messages(self) -> Iterator[Message]:
        """``iter_messages(self.data)``; raises WireError INVALID_RESERVED_FIELD."""
        return iter_messages(self.data)

    def write(self, w: Writer) -> None:
        w.raw(POLL_PREFIX.pack(self.partition_id, self.current_offset, self.messages_count))
        w.raw(self.data)

    @classmethod
    def read(cls, r: Reader) -> Self:
        prefix = POLL_PREFIX.unpack_from(r.buf, r.need(POLL_PREFIX.size, "poll prefix"))
        return cls(*prefix, r.rest())
