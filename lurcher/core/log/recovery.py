"""Start-up checks of a segment: make the ``.index`` agree with the ``.log``.

Invariant restored by ``recover``: the log holds exactly ``count`` whole messages with offsets
start..start+count-1, and the index holds exactly one entry per message with its END position.

Steps: (1) keep the longest index prefix that is structurally sound (dense relative offsets,
every message >= 64 bytes, ends within the log), checked with numpy over all entries;
(2) confirm the header of the last kept entry (offset and declared size) with one read,
stepping back while it disagrees; (3) scan the log after that entry message by message
(start-up only, a Python loop is acceptable) accepting each message whose header is whole,
whose declared size fits, whose offset is the next one and whose checksum matches;
(4) truncate the log after the last accepted message (a torn tail) and rewrite the index
if it changed.
"""

from __future__ import annotations

import struct

import msgspec
import numpy as np
import xxhash

from lurcher.core.log.index import SegmentIndex
from lurcher.core.log.io import IoBackend
from lurcher.core.wire.batch import HEADER_BYTES, INDEX_DTYPE, INDEX_ENTRY_BYTES

SCAN_CHUNK_BYTES = 16 * 1024 * 1024
_OFFSET_TS = struct.Struct("<QQ")      # offset, timestamp at header byte 24
_LENGTHS = struct.Struct("<II")        # user_headers_length, payload_length at byte 48
_CHECKSUM = struct.Struct("<Q")
assert _OFFSET_TS.size == 16 and _LENGTHS.size == 8


class RecoveryReport(msgspec.Struct, frozen=True):
    """What recovery changed in one segment."""

    index_entries_dropped: int = 0
    index_entries_added: int = 0
    log_bytes_truncated: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.index_entries_dropped or self.index_entries_added
                    or self.log_bytes_truncated)


def sound_prefix(index: SegmentIndex, log_size: int) -> int:
    """Length of the longest prefix of ``index`` that is structurally consistent."""
    n = index.count
    if n == 0:
        return 0
    ends = index.ends.astype(np.int64)
    starts = np.concatenate(([0], ends[:-1]))
    ok = ((index.rel == np.arange(n, dtype=np.uint32))
          & (ends - starts >= HEADER_BYTES) & (ends <= log_size))
    return n if ok.all() else int(np.argmin(ok))


def header_agrees(io: IoBackend, fd: int, index: SegmentIndex, i: int,
                  start_offset: int) -> bool:
    """Does the log header of entry ``i`` carry its offset and a size equal to its slot?"""
    start, end = index.start_of(i), index.end_of(i)
    header = io.pread(fd, HEADER_BYTES, start)
    if len(header) < HEADER_BYTES:
        return False
    offset, _ = _OFFSET_TS.unpack_from(header, 24)
    user_headers, payload = _LENGTHS.unpack_from(header, 48)
    return offset == start_offset + i and HEADER_BYTES + payload + user_headers == end - start


def scan_log(io: IoBackend, fd: int, position: int, log_size: int, start_offset: int,
             first_rel: int) -> tuple[np.ndarray, int]:
    """Index entries of the whole, valid messages from ``position``; and where they stop."""
    rows: list[tuple[int, int, int]] = []
    rel = first_rel
    want = SCAN_CHUNK_BYTES
    while position + HEADER_BYTES <= log_size:
        chunk = io.pread(fd, min(want, log_size - position), position)
        used, rel, need = _scan_chunk(chunk, position, start_offset, rel, rows)
        if used == 0 and need == 0:
            break
        if used == 0:
            if position + need > log_size:
                break
            want = need
        else:
            want = SCAN_CHUNK_BYTES
        position += used
    out = np.array(rows, dtype=np.uint64).reshape(-1, 3)
    entries = np.empty(len(rows), dtype=INDEX_DTYPE)
    entries["offset"], entries["position"], entries["timestamp"] = out.T
    return entries, position


def _scan_chunk(chunk: bytes, base: int, start_offset: int, rel: int,
                rows: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    """Accept messages from ``chunk``: (bytes used, next rel, bytes needed to go on).

    ``need`` is 0 when the next message is invalid (stop), else the size of a message that
    did not fit in the chunk.
    """
    view = memoryview(chunk)
    p = 0
    digest = xxhash.xxh3_64_intdigest
    while p + HEADER_BYTES <= len(chunk):
        offset, timestamp = _OFFSET_TS.unpack_from(chunk, p + 24)
        user_headers, payload = _LENGTHS.unpack_from(chunk, p + 48)
        size = HEADER_BYTES + payload + user_headers
        if offset != start_offset + rel:
            return p, rel, 0
        if p + size > len(chunk):
            return p, rel, size
        if _CHECKSUM.unpack_from(chunk, p)[0] != digest(view[p + 8:p + size]):
            return p, rel, 0
        p += size
        rows.append((rel, base + p, timestamp))
        rel += 1
    return p, rel, HEADER_BYTES if p == 0 else 0


def recover(io: IoBackend, log_fd: int, index_fd: int, index: SegmentIndex,
            start_offset: int) -> RecoveryReport:
    """Make ``index`` (already loaded from the file) and the log files agree; see module doc."""
    log_size = io.size(log_fd)
    original = index.count
    keep = sound_prefix(index, log_size)
    while keep > 0 and not header_agrees(io, log_fd, index, keep - 1, start_offset):
        keep -= 1
    index.truncate(keep)
    position = index.start_of(keep) if keep else 0
    tail, valid_end = scan_log(io, log_fd, position, log_size, start_offset, keep)
    index.append(tail)
    if valid_end < log_size:
        io.truncate(log_fd, valid_end)
    if keep != original or len(tail) or io.size(index_fd) != index.count * INDEX_ENTRY_BYTES:
        io.truncate(index_fd, keep * INDEX_ENTRY_BYTES)
        if len(tail):
            io.pwrite(index_fd, tail.tobytes(), keep * INDEX_ENTRY_BYTES)
    return RecoveryReport(index_entries_dropped=original - keep,
                          index_entries_added=len(tail),
                          log_bytes_truncated=log_size - valid_end)
