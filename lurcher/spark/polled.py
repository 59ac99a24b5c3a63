"""``PolledView``: the messages of one poll answer as numpy columns over its bytes.

A poll answer is the stored messages back to back (64-byte header, payload, user
headers). Finding where each message starts is the only per-message Python step (each
start depends on the previous message's lengths); every header field after that is one
vectorized gather (``lurcher.core.wire.batch`` helpers). ``select``/``below`` narrow a
view without copying message bytes.

Invariants: ``starts`` is strictly increasing and every selected message lies wholly
inside ``data``; a truncated tail is dropped, as the SDK's message iterator does.
"""

from __future__ import annotations

import struct

import numpy as np

from lurcher.core.wire.batch import (
    CHECKSUM_AT,
    HEADER_BYTES,
    ID_AT,
    ORIGIN_TIMESTAMP_AT,
    USER_HEADERS_LENGTH_AT,
    read_declared_sizes,
    read_offsets,
    read_timestamps,
    read_u64_at,
)
from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.responses.messages import PolledMessages

_LENGTHS = struct.Struct("<II")  # user_headers_length, payload_length


def message_starts(data: Buffer, count: int) -> np.ndarray:
    """Start positions (int64) of up to ``count`` complete messages in ``data``."""
    unpack = _LENGTHS.unpack_from
    size = len(data)
    starts = []
    pos = 0
    for _ in range(count):
        if pos + HEADER_BYTES > size:
            break
        headers_len, payload_len = unpack(data, pos + USER_HEADERS_LENGTH_AT)
        end = pos + HEADER_BYTES + payload_len + headers_len
        if end > size:
            break
        starts.append(pos)
        pos = end
    return np.array(starts, dtype=np.int64)


class PolledView:
    """Selected messages of one poll answer of one partition."""

    __slots__ = ("partition_id", "data", "starts", "_offsets")

    def __init__(self, partition_id: int, data: Buffer, starts: np.ndarray) -> None:
        self.partition_id = partition_id
        self.data = data
        self.starts = starts
        self._offsets: np.ndarray | None = None

    @classmethod
    def of(cls, polled: PolledMessages) -> "PolledView":
        return cls(polled.partition_id, polled.data,
                   message_starts(polled.data, polled.messages_count))

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def offsets(self) -> np.ndarray:
        if self._offsets is None:
            self._offsets = read_offsets(self.data, self.starts)
        return self._offsets

    def timestamps(self) -> np.ndarray:
        return read_timestamps(self.data, self.starts)

    def origin_timestamps(self) -> np.ndarray:
        return read_u64_at(self.data, self.starts, ORIGIN_TIMESTAMP_AT)

    def checksums(self) -> np.ndarray:
        return read_u64_at(self.data, self.starts, CHECKSUM_AT)

    def ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) u64 halves of every message id."""
        return (read_u64_at(self.data, self.starts, ID_AT),
                read_u64_at(self.data, self.starts, ID_AT + 8))

    def sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """(payload_length, user_headers_length) as int64 arrays."""
        return read_declared_sizes(self.data, self.starts)

    def select(self, mask: np.ndarray) -> "PolledView":
        return PolledView(self.partition_id, self.data, self.starts[mask])

    def below(self, end: int) -> "PolledView":
        """Messages with offset < ``end`` (offsets ascend within a poll)."""
        keep = int(np.searchsorted(self.offsets, np.uint64(end), side="left"))
        if keep == self.count:
            return self
        return PolledView(self.partition_id, self.data, self.starts[:keep])
