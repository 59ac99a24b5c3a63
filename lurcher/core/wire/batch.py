"""A batch of messages in wire form, and vectorized access to message headers.

Layout inside SendMessages: ``messages_count u32``, an index block of ``count`` x 16 bytes
(u32 relative offset = 0, u32 end position of the message inside the blob, u64 timestamp = 0),
then the messages blob (each message: 64-byte header, payload, user headers).

``MessageBatch`` owns no per-message objects: it is a view over the index block and the blob.
Every per-message operation (validation, stamping offsets/timestamps/ids and checksums,
reading header fields, building index entries) is one call over all messages: validation and
stamping go to ``_batchhash`` (C, built at install time) and fall back to numpy passes where
it was not built; both give the same results (``tests/unit/test_batch.py`` compares them).

Invariants after ``validate()``: ``ends()`` is non-decreasing, starts at >= 64, ends at
``len(blob)``, and each message's header lengths add up to its slot in the blob.
"""

from __future__ import annotations

import operator
import os
import struct
import time
import uuid
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import xxhash

from lurcher.core.wire.buffer import Buffer, Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.header_blocks import validate_header_blocks

INDEX_ENTRY_BYTES = 16
HEADER_BYTES = 64
MAX_PAYLOAD_BYTES = 64_000_000
MAX_USER_HEADERS_BYTES = 100_000

# Byte offsets of the header fields (wire-protocol §9.1).
CHECKSUM_AT = 0
ID_AT = 8
OFFSET_AT = 24
TIMESTAMP_AT = 32
ORIGIN_TIMESTAMP_AT = 40
USER_HEADERS_LENGTH_AT = 48
PAYLOAD_LENGTH_AT = 52
RESERVED_AT = 56

HEADER_DTYPE = np.dtype([
    ("checksum", "<u8"), ("id_lo", "<u8"), ("id_hi", "<u8"), ("offset", "<u8"),
    ("timestamp", "<u8"), ("origin_timestamp", "<u8"), ("user_headers_length", "<u4"),
    ("payload_length", "<u4"), ("reserved", "<u8"),
])
INDEX_DTYPE = np.dtype([("offset", "<u4"), ("position", "<u4"), ("timestamp", "<u8")])
INDEX_ENTRY = struct.Struct("<IIQ")  # one INDEX_DTYPE record
assert HEADER_DTYPE.itemsize == HEADER_BYTES
assert HEADER_DTYPE.fields["payload_length"][1] == PAYLOAD_LENGTH_AT
assert INDEX_DTYPE.itemsize == INDEX_ENTRY_BYTES

U64_MASK = (1 << 64) - 1
_BYTES8 = np.arange(8, dtype=np.int64)
_BYTES4 = np.arange(4, dtype=np.int64)
# UUIDv4 bits as they land in the little-endian id field (uuid bytes in standard order).
_LO_VERSION_CLEAR = np.uint64(~(0xF << 52) & U64_MASK)
_LO_VERSION_SET = np.uint64(0x4 << 52)
_HI_VARIANT_CLEAR = np.uint64(~0xC0 & U64_MASK)
_HI_VARIANT_SET = np.uint64(0x80)


def uuid4_words(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Random (n, 2) uint64 words shaped into UUIDv4 ids: the id fields' low and high words."""
    return ((pairs[:, 0] & _LO_VERSION_CLEAR) | _LO_VERSION_SET,
            (pairs[:, 1] & _HI_VARIANT_CLEAR) | _HI_VARIANT_SET)


# ---------------------------------------------------------------------------------------
# Vectorized header field access over a blob + message start positions.
# ---------------------------------------------------------------------------------------

def _u8_array(blob: Buffer) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.uint8)


def read_u64_at(blob: Buffer, starts: np.ndarray, field: int) -> np.ndarray:
    """The u64 at ``starts + field`` for every start (a fresh array)."""
    starts = np.asarray(starts, dtype=np.int64)
    if not (starts & 7).any() and field % 8 == 0:
        words = np.frombuffer(blob, dtype="<u8", count=len(blob) // 8)
        return words[(starts + field) >> 3]
    idx = (starts + field)[:, None] + _BYTES8
    return _u8_array(blob)[idx].view("<u8").reshape(-1)


def read_u32_at(blob: Buffer, starts: np.ndarray, field: int) -> np.ndarray:
    """The u32 at ``starts + field`` for every start (a fresh array)."""
    starts = np.asarray(starts, dtype=np.int64)
    idx = (starts + field)[:, None] + _BYTES4
    return _u8_array(blob)[idx].view("<u4").reshape(-1)


def write_u64_at(blob: Buffer, starts: np.ndarray, field: int, values: np.ndarray | int,
                 aligned: bool | None = None) -> None:
    """Store ``values`` (array or scalar) as u64 at ``starts + field`` in a writable blob.

    Uses a u64 view when every target is 8-byte aligned, a byte scatter otherwise.
    Raises ValueError (numpy) when the blob is read-only.
    """
    starts = np.asarray(starts, dtype=np.int64)
    if aligned is None:
        aligned = not (starts & 7).any()
    if aligned and field % 8 == 0:
        words = np.frombuffer(blob, dtype="<u8", count=len(blob) // 8)
        words[(starts + field) >> 3] = values
        return
    vals = np.broadcast_to(np.asarray(values, dtype="<u8"), starts.shape)
    idx = (starts + field)[:, None] + _BYTES8
    _u8_array(blob)[idx] = np.ascontiguousarray(vals).view(np.uint8).reshape(-1, 8)


def starts_from_ends(ends: np.ndarray) -> np.ndarray:
    """Start positions (int64) from END positions: 0, ends[0], ..., ends[n-2]."""
    out = np.zeros(len(ends), dtype=np.int64)
    out[1:] = ends[:-1]
    return out


def read_offsets(blob: Buffer, starts: np.ndarray) -> np.ndarray:
    """Header ``offset`` of every message (stored messages)."""
    return read_u64_at(blob, starts, OFFSET_AT)


def read_timestamps(blob: Buffer, starts: np.ndarray) -> np.ndarray:
    """Header ``timestamp`` of every message (stored messages)."""
    return read_u64_at(blob, starts, TIMESTAMP_AT)


def read_declared_sizes(blob: Buffer, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(payload_length, user_headers_length) of every message, as int64 arrays."""
    both = read_u64_at(blob, starts, USER_HEADERS_LENGTH_AT)
    user_headers = (both & np.uint64(0xFFFF_FFFF)).astype(np.int64)
    payload = (both >> np.uint64(32)).astype(np.int64)
    return payload, user_headers


def _native_checksums() -> tuple[Any, str | None]:
    """The C helper bound to xxhash's own XXH3_64bits (its CPU-dispatched entry where the
    build exports one) and the symbol's name, or (None, None) where it is unavailable (no
    compiler at install time, or an xxhash build that does not export the function)."""
    try:
        from lurcher.core.wire import _batchhash
        from xxhash import _xxhash
        symbol = _batchhash.bind(_xxhash.__file__)
    except (ImportError, OSError, AttributeError):
        return None, None
    return _batchhash, symbol


_native, CHECKSUM_SYMBOL = _native_checksums()
NATIVE_CHECKSUMS = _native is not None


def checksums(blob: Buffer, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """XXH3-64 (seed 0) of bytes [start+8, end) of every message, as a u64 array.

    Exactly what Iggy 0.8 stores (``XxHash3_64::oneshot`` over the message minus its first 8
    bytes). One call for the whole batch through ``_batchhash`` (a C loop over xxhash's own
    XXH3_64bits, built at install time; ``setup.py``). Without it (no C compiler when
    installing) a list comprehension hashes message by message, about 3x slower.
    """
    first = np.ascontiguousarray(starts + 8, dtype=np.int64)
    last = np.ascontiguousarray(ends, dtype=np.int64)
    if _native is not None:
        out = np.empty(len(first), dtype=np.uint64)
        _native.xxh3_ranges(blob, first, last, out)
        return out
    view = blob if isinstance(blob, memoryview) else memoryview(blob)
    digest = xxhash.xxh3_64_intdigest
    return np.array([digest(view[s:e]) for s, e in zip(first.tolist(), last.tolist())],
                    dtype=np.uint64)


_rng = np.random.PCG64DXSM()


def _reseed() -> None:
    """A fresh generator seeded from the OS (also in every forked child: no shared ids)."""
    global _rng
    _rng = np.random.PCG64DXSM(int.from_bytes(os.urandom(32), "little"))


_reseed()
os.register_at_fork(after_in_child=_reseed)


# The checks of ``MessageBatch.validate``, in the order it makes them (``_batchhash.scan``
# returns these numbers): each failing check names the first message that fails it.
(SCAN_OK, SCAN_OFFSET, SCAN_TIMESTAMP, SCAN_DECREASING, SCAN_LAST_END, SCAN_TOO_SMALL,
 SCAN_OVER_SLOT, SCAN_BIG_PAYLOAD, SCAN_BIG_HEADERS, SCAN_UNDER_SLOT, SCAN_RESERVED) = range(11)

_SCAN_ERRORS = {
    SCAN_OFFSET: (ErrorCode.NON_ZERO_OFFSET, "index offset is not 0"),
    SCAN_TIMESTAMP: (ErrorCode.NON_ZERO_TIMESTAMP, "index timestamp is not 0"),
    SCAN_DECREASING: (ErrorCode.MISSING_INDEX, "index positions decrease"),
    SCAN_LAST_END: (ErrorCode.INVALID_MESSAGES_SIZE, "index ends at {last_end}, blob has "
                                                     "{blob_bytes} bytes"),
    SCAN_TOO_SMALL: (ErrorCode.TOO_SMALL_MESSAGE, "message shorter than its 64-byte header"),
    SCAN_OVER_SLOT: (ErrorCode.MISSING_INDEX, "header lengths exceed the message's slot"),
    SCAN_BIG_PAYLOAD: (ErrorCode.TOO_BIG_MESSAGE_PAYLOAD, "payload above {max_payload} bytes"),
    SCAN_BIG_HEADERS: (ErrorCode.TOO_BIG_USER_HEADERS,
                       "user headers above {max_user_headers} bytes"),
    SCAN_UNDER_SLOT: (ErrorCode.INVALID_MESSAGES_SIZE,
                      "header lengths smaller than the message's slot"),
    SCAN_RESERVED: (ErrorCode.INVALID_RESERVED_FIELD, "reserved header field is not 0"),
}
_SCAN_LIMIT = (1 << 62)  # limits above this are unlimited (the C scan takes signed 64 bits)


def _first(bad: np.ndarray) -> int:
    return int(np.argmax(bad))


def scan_numpy(index: Buffer, blob: Buffer, max_payload: int,
               max_user_headers: int) -> tuple[int, int, int]:
    """``_batchhash.scan`` with numpy passes: (check, first failing message or -1, messages
    with user headers). ``index`` holds at least one whole entry."""
    idx = np.frombuffer(index, dtype=INDEX_DTYPE)
    for check, field in ((SCAN_OFFSET, "offset"), (SCAN_TIMESTAMP, "timestamp")):
        if idx[field].any():
            return check, _first(idx[field] != 0), 0
    ends = idx["position"].astype(np.int64)
    starts = np.concatenate(([0], ends[:-1]))
    sizes = ends - starts
    if (sizes < 0).any():
        return SCAN_DECREASING, _first(sizes < 0), 0
    if int(ends[-1]) != len(blob):
        return SCAN_LAST_END, len(ends) - 1, 0
    if (sizes < HEADER_BYTES).any():
        return SCAN_TOO_SMALL, _first(sizes < HEADER_BYTES), 0
    payload, user_headers = read_declared_sizes(blob, starts)
    declared = HEADER_BYTES + payload + user_headers
    for check, bad in ((SCAN_OVER_SLOT, declared > sizes),
                       (SCAN_BIG_PAYLOAD, payload > max_payload),
                       (SCAN_BIG_HEADERS, user_headers > max_user_headers),
                       (SCAN_UNDER_SLOT, declared < sizes)):
        if bad.any():
            return check, _first(bad), 0
    reserved = read_u64_at(blob, starts, RESERVED_AT)
    if reserved.any():
        return SCAN_RESERVED, _first(reserved != 0), 0
    return SCAN_OK, -1, int(np.count_nonzero(user_headers))


def stamp_numpy(blob: Buffer, index: Buffer, base_offset: int, timestamp_us: int,
                randoms: np.ndarray) -> None:
    """``_batchhash.stamp`` with numpy passes (the blob's slots are valid)."""
    ends = np.frombuffer(index, dtype=INDEX_DTYPE)["position"]
    starts = starts_from_ends(ends)
    offsets = np.arange(base_offset, base_offset + len(ends), dtype=np.uint64)
    aligned = not (starts & 7).any()
    write_u64_at(blob, starts, OFFSET_AT, offsets, aligned)
    write_u64_at(blob, starts, TIMESTAMP_AT, np.uint64(timestamp_us), aligned)
    zero = (read_u64_at(blob, starts, ID_AT) | read_u64_at(blob, starts, ID_AT + 8)) == 0
    if zero.any():
        low, high = uuid4_words(randoms.reshape(-1, 2)[zero])
        write_u64_at(blob, starts[zero], ID_AT, low, aligned)
        write_u64_at(blob, starts[zero], ID_AT + 8, high, aligned)
    write_u64_at(blob, starts, CHECKSUM_AT, checksums(blob, starts, ends), aligned)


_scan = getattr(_native, "scan", None) or scan_numpy
_stamp = getattr(_native, "stamp", None) or stamp_numpy


# ---------------------------------------------------------------------------------------


class MessageBatch:
    """Views over the index block and the messages blob; no per-message objects."""

    __slots__ = ("count", "index", "blob", "stamp_us")

    def __init__(self, count: int, index: memoryview, blob: memoryview,
                 stamp_us: int = 0) -> None:
        self.count = count
        self.index = index
        self.blob = blob
        self.stamp_us = stamp_us  # a replicated op's time for it (0: the partition's clock)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """messages_count, index block, and the rest of the buffer as the blob."""
        count = r.u32("messages_count")
        index = r.view(count * INDEX_ENTRY_BYTES, "index block")
        return cls(count, index, r.rest())

    def write(self, w: Writer) -> None:
        w.u32(self.count).raw(self.index).raw(self.blob)

    # -- views ---------------------------------------------------------------------------

    def index_array(self) -> np.ndarray:
        """The index block as a structured array (zero-copy; fields offset/position/timestamp)."""
        return np.frombuffer(self.index, dtype=INDEX_DTYPE, count=self.count)

    def ends(self) -> np.ndarray:
        """End position of every message in the blob (u32, zero-copy view of the index)."""
        return self.index_array()["position"]

    def starts(self) -> np.ndarray:
        """Start position of every message in the blob (int64)."""
        return starts_from_ends(self.ends())

    def offsets(self) -> np.ndarray:
        """Header offsets of every message (meaningful after ``stamp``)."""
        return read_offsets(self.blob, self.starts())

    def timestamps(self) -> np.ndarray:
        """Header timestamps of every message (meaningful after ``stamp``)."""
        return read_timestamps(self.blob, self.starts())

    @property
    def size_bytes(self) -> int:
        return len(self.blob)

    # -- validation ----------------------------------------------------------------------

    def validate(self, max_payload_bytes: int = MAX_PAYLOAD_BYTES,
                 max_user_headers_bytes: int = MAX_USER_HEADERS_BYTES) -> None:
        """Check a batch received from a client, as the 0.8 server does.

        Raises IggyError: INVALID_MESSAGES_COUNT (count 0), INVALID_INDEXES_BYTE_SIZE (index
        block length), NON_ZERO_OFFSET / NON_ZERO_TIMESTAMP (index entry fields), MISSING_INDEX
        (decreasing positions, or a header claiming more bytes than its slot: the server cannot
        build that message's view), INVALID_MESSAGES_SIZE (last end != blob length, or a
        header claiming fewer bytes than its slot), TOO_SMALL_MESSAGE (< 64 bytes),
        TOO_BIG_MESSAGE_PAYLOAD, TOO_BIG_USER_HEADERS, INVALID_RESERVED_FIELD (a header's
        reserved u64 is not 0: the official client refuses such a message when polling), and
        the user-headers rules of ``header_blocks`` (only messages that have headers). Each
        check runs over all messages at once, so with several faults the one reported may
        differ from the server's.
        """
        if self.count == 0:
            raise IggyError(ErrorCode.INVALID_MESSAGES_COUNT, "batch has no messages")
        if len(self.index) != self.count * INDEX_ENTRY_BYTES:
            raise IggyError(ErrorCode.INVALID_INDEXES_BYTE_SIZE, f"{len(self.index)} bytes")
        max_payload = min(max_payload_bytes, _SCAN_LIMIT)
        max_user_headers = min(max_user_headers_bytes, _SCAN_LIMIT)
        check, message, with_headers = _scan(self.index, self.blob, max_payload,
                                             max_user_headers)
        if check != SCAN_OK:
            raise self._scan_error(check, message, max_payload, max_user_headers)
        if with_headers:
            self._validate_header_blocks()

    def _scan_error(self, check: int, message: int, max_payload: int,
                    max_user_headers: int) -> IggyError:
        code, what = _SCAN_ERRORS[check]
        if check == SCAN_LAST_END:
            return IggyError(code, what.format(last_end=int(self.ends()[-1]),
                                               blob_bytes=len(self.blob)))
        what = what.format(max_payload=max_payload, max_user_headers=max_user_headers)
        return IggyError(code, f"{what} (message {message})")

    def _validate_header_blocks(self) -> None:
        """The user-headers rules of ``header_blocks``, for the messages that have them."""
        ends = self.ends().astype(np.int64)
        _, user_headers = read_declared_sizes(self.blob, starts_from_ends(ends))
        with_headers = np.flatnonzero(user_headers)
        block_ends = ends[with_headers]
        validate_header_blocks(self.blob, block_ends - user_headers[with_headers], block_ends,
                               with_headers)

    # -- server side: stamping -----------------------------------------------------------

    def stamp(self, base_offset: int, timestamp_us: int) -> None:
        """Fill offsets base..base+n-1, the batch timestamp, ids where 0, then checksums.

        The blob must be writable and the batch valid. Raises ValueError for a read-only blob.
        """
        if self.blob.readonly:
            raise ValueError("cannot stamp a read-only blob")
        if self.count:
            _stamp(self.blob, self.index, base_offset, timestamp_us,
                   _rng.random_raw(2 * self.count))

    def index_entries(self, segment_base_position: int, first_relative_offset: int,
                      timestamp: int) -> bytes:
        """The on-disk index entries of this batch: (relative offset u32, END position u32
        within the segment's .log, timestamp u64) per message."""
        if self.count == 1:  # a lone message: one pack, not five numpy calls (3 us)
            _, end, _ = INDEX_ENTRY.unpack_from(self.index)
            return INDEX_ENTRY.pack(first_relative_offset,
                                    (end + segment_base_position) & 0xFFFFFFFF, timestamp)
        out = np.empty(self.count, dtype=INDEX_DTYPE)
        out["offset"] = np.arange(first_relative_offset, first_relative_offset + self.count,
                                  dtype=np.uint32)
        out["position"] = self.ends() + np.uint32(segment_base_position)
        out["timestamp"] = timestamp
        return out.tobytes()

    # -- client side: building -----------------------------------------------------------

    @classmethod
    def build(cls, payloads: Sequence[bytes], ids: Sequence[int] | None = None,
              user_headers: Sequence[bytes] | None = None,
              origin_timestamp_us: int | None = None, random_ids: bool = False) -> Self:
        """A batch as a client sends it: checksum/offset/timestamp 0, index ends filled.

        ``origin_timestamp_us`` defaults to the current wall clock. With ``random_ids`` a
        message without an id (none given, or 0) gets a random UUIDv4 id here, as the server
        would give it, so that the batch sent again carries the same ids. Raises ValueError
        when ``ids`` or ``user_headers`` do not match ``payloads`` in length.
        """
        n = len(payloads)
        headers = np.zeros(n, dtype=HEADER_DTYPE)
        headers["payload_length"] = np.fromiter(map(len, payloads), dtype=np.uint32, count=n)
        if user_headers is not None:
            _same_length(user_headers, n, "user_headers")
            headers["user_headers_length"] = np.fromiter(map(len, user_headers),
                                                         dtype=np.uint32, count=n)
        if ids is not None:
            _same_length(ids, n, "ids")
            _fill_ids(headers, ids)
        if random_ids:
            _fill_random_ids(headers)
        if origin_timestamp_us is None:
            origin_timestamp_us = time.time_ns() // 1000
        headers["origin_timestamp"] = origin_timestamp_us
        index = np.zeros(n, dtype=INDEX_DTYPE)
        sizes = (HEADER_BYTES + headers["payload_length"].astype(np.int64)
                 + headers["user_headers_length"])
        index["position"] = np.cumsum(sizes)
        blob = _assemble(headers.tobytes(), payloads, user_headers)
        return cls(n, memoryview(index.tobytes()), memoryview(blob))

    def writable(self) -> MessageBatch:
        """A copy whose blob is a bytearray (for ``stamp``)."""
        return MessageBatch(self.count, self.index, memoryview(bytearray(self.blob)))


def _same_length(values: Sequence[object], n: int, what: str) -> None:
    if len(values) != n:
        raise ValueError(f"{what}: {len(values)} values for {n} payloads")


def _fill_ids(headers: np.ndarray, ids: Sequence[Any]) -> None:
    """Each id an int or a UUID; TypeError for another kind (a float or a string is not
    rounded or parsed into one), OverflowError for an int outside 0..2**128-1."""
    as_int = np.array([i.int if isinstance(i, uuid.UUID) else operator.index(i) for i in ids],
                      dtype=object)
    headers["id_lo"] = (as_int & U64_MASK).astype(np.uint64)
    headers["id_hi"] = (as_int >> 64).astype(np.uint64)


def _fill_random_ids(headers: np.ndarray) -> None:
    """A random UUIDv4 id for each header whose id is 0."""
    zero = (headers["id_lo"] | headers["id_hi"]) == 0
    if zero.any():
        low, high = uuid4_words(_rng.random_raw(2 * len(headers)).reshape(-1, 2)[zero])
        headers["id_lo"][zero] = low
        headers["id_hi"][zero] = high


def _assemble(header_bytes: bytes, payloads: Sequence[bytes],
              user_headers: Sequence[bytes] | None) -> bytes:
    n = len(payloads)
    view = memoryview(header_bytes)
    stride = 3 if user_headers is not None else 2
    parts: list[Buffer] = [b""] * (stride * n)
    parts[0::stride] = [view[i:i + HEADER_BYTES] for i in range(0, n * HEADER_BYTES, HEADER_BYTES)]
    parts[1::stride] = payloads
    if user_headers is not None:
        parts[2::stride] = user_headers
    return b"".join(parts)
