"""Start-up checks of a segment: make the ``.index`` agree with the ``.log``, keeping whole
batches only.

Invariant restored by ``recover``: the log holds exactly ``count`` whole messages with offsets
start..start+count-1, and the index holds exactly one entry per message with its END position;
every batch is there whole or not at all.

How a batch boundary is known (no format change): every message of a batch carries the same
server timestamp and consecutive batches get strictly increasing ones, so a batch is a run
of equal timestamps. An append writes the batch's log bytes first and its index entries
after them (io_uring links the two writes). Several batches of a partition may be in flight
at once (``appends``), each at its own positions, and io_uring may run their writes in any
order, so a kill can leave a later batch written past an earlier batch that is missing
(zeros) or torn. The index prefix stops at the first unsound entry and the log scan at the
first message that is not whole and valid, so nothing past such a hole is kept. So after a
kill: a batch with at least one index entry in the kept prefix has all its log bytes (a torn
index is completed from the log); a run of log messages after the index that is the last
one in the log may be a prefix of an unacknowledged batch: it is dropped. Runs followed by
another run are whole (all of their bytes were written) and are kept, even when not yet
acknowledged (a batch is whole or absent, never a part). A missing index file (a crash
leaves one only between the creation of a new segment's log and its index, before the
first write) and a sealed segment (its last batch was finished before the next segment was
created) trust every whole record of the log.

A power loss (not a kill) can also tear a batch the index covers: writeback sends the pages
of the log and of the index to the device in any order, so an index page of a batch that was
written but not yet fsynced can be on the device while one of its log pages is not. Such a
batch was never acknowledged with ``enforce_fsync`` (its fsync round did not finish), and
the writes not yet synced are the newest ones: so in a segment that is not sealed the
checksums of the messages in the last ``VERIFY_TAIL_BYTES`` the index covers are checked
(one C call over them), and the index is cut at the start of the batch holding the first
message whose stored checksum is wrong (step 3 then drops that batch's rest and everything
after it). Older bytes are not read back at start (a full check of every segment would read
the whole log).

Steps: (1) keep the longest index prefix that is structurally sound (dense relative offsets,
every message >= 64 bytes, ends within the log, timestamps never decreasing), checked with
numpy over all entries; (2) confirm the header of the last kept entry (offset, timestamp and
declared size) with one read, stepping back while it disagrees, then, unless the segment is
trusted (sealed, or no index file), check the checksums of the covered tail (above); (3) scan
the log after that entry message by message
(start-up only, a Python loop is acceptable) accepting each message whose header is whole,
whose declared size fits, whose offset is the next one and whose checksum matches;
(4) keep whole batches only (above); (5) truncate the log after the last kept message and
rewrite the index if it changed.
"""

from __future__ import annotations

import struct

import msgspec
import numpy as np
import xxhash

from lurcher.core.log.index import SegmentIndex
from lurcher.core.log.io import IoBackend
from lurcher.core.wire.batch import (HEADER_BYTES, INDEX_DTYPE, INDEX_ENTRY_BYTES,
                                     MAX_PAYLOAD_BYTES, MAX_USER_HEADERS_BYTES, checksums)

SCAN_CHUNK_BYTES = 16 * 1024 * 1024
MAX_MESSAGE_BYTES = HEADER_BYTES + MAX_USER_HEADERS_BYTES + MAX_PAYLOAD_BYTES
"""The largest message a send can store: a header declaring more is damage, not read."""
VERIFY_TAIL_BYTES = 16 * 1024 * 1024
_OFFSET_TS = struct.Struct("<QQ")      # offset, timestamp at header byte 24
_LENGTHS = struct.Struct("<II")        # user_headers_length, payload_length at byte 48
_CHECKSUM = struct.Struct("<Q")
assert _OFFSET_TS.size == 16 and _LENGTHS.size == 8


class SegmentMisnamed(OSError):
    """A segment's files do not hold the offsets its name says (a file renamed or copied by
    hand): the server refuses to start rather than cut or hide stored messages."""


def first_message_offset(io: IoBackend, fd: int, log_size: int) -> int | None:
    """The offset in the log's first message when that message is whole and its checksum
    matches; None otherwise (an empty log, or a first write torn by a crash)."""
    if log_size < HEADER_BYTES:
        return None
    user_headers, payload = _LENGTHS.unpack_from(io.pread(fd, HEADER_BYTES, 0), 48)
    size = HEADER_BYTES + payload + user_headers
    if size > min(log_size, MAX_MESSAGE_BYTES):
        return None
    message = io.pread(fd, size, 0)
    if _CHECKSUM.unpack_from(message)[0] != xxhash.xxh3_64_intdigest(memoryview(message)[8:]):
        return None
    return _OFFSET_TS.unpack_from(message, 24)[0]


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
    """Length of the longest prefix of ``index`` that is structurally consistent (its
    timestamps never decrease: a damaged one would date every later batch after it)."""
    n = index.count
    if n == 0:
        return 0
    ends = index.ends.astype(np.int64)
    starts = np.concatenate(([0], ends[:-1]))
    timestamps = index.timestamps
    ok = ((index.rel == np.arange(n, dtype=np.uint32))
          & (ends - starts >= HEADER_BYTES) & (ends <= log_size)
          & np.concatenate(([True], timestamps[1:] >= timestamps[:-1])))
    return n if ok.all() else int(np.argmin(ok))


def header_agrees(io: IoBackend, fd: int, index: SegmentIndex, i: int,
                  start_offset: int) -> bool:
    """Does the log header of entry ``i`` carry its offset, its timestamp and a size equal
    to its slot?"""
    start, end = index.start_of(i), index.end_of(i)
    header = io.pread(fd, HEADER_BYTES, start)
    if len(header) < HEADER_BYTES:
        return False
    offset, timestamp = _OFFSET_TS.unpack_from(header, 24)
    user_headers, payload = _LENGTHS.unpack_from(header, 48)
    return (offset == start_offset + i and timestamp == int(index.timestamps[i])
            and HEADER_BYTES + payload + user_headers == end - start)


def checksummed_prefix(io: IoBackend, fd: int, index: SegmentIndex, keep: int,
                       verify_bytes: int = VERIFY_TAIL_BYTES) -> int:
    """How many of the first ``keep`` entries stay once the checksums of the messages in the
    last ``verify_bytes`` they cover are checked: all of them, or up to the first message of
    the batch (run of equal timestamps) holding the first message whose stored checksum is
    wrong."""
    if keep == 0:
        return 0
    ends = index.ends[:keep].astype(np.int64)
    starts = np.concatenate(([0], ends[:-1]))
    first = int(np.searchsorted(starts, ends[-1] - verify_bytes, side="left"))
    base = int(starts[first])
    blob = io.pread(fd, int(ends[-1]) - base, base)
    rel_starts, rel_ends = starts[first:] - base, ends[first:] - base
    if len(blob) < rel_ends[-1]:
        return keep  # shorter than the index says: ``sound_prefix`` already cut it
    raw = np.frombuffer(blob, dtype=np.uint8)
    stored = raw[rel_starts[:, None] + np.arange(8)].copy().view("<u8").ravel()
    bad = np.flatnonzero(checksums(blob, rel_starts, rel_ends) != stored)
    if not len(bad):
        return keep
    torn = first + int(bad[0])
    stamps = index.timestamps[:keep]
    return int(np.searchsorted(stamps, stamps[torn], side="left"))


def scan_log(io: IoBackend, fd: int, position: int, log_size: int, start_offset: int,
             first_rel: int) -> tuple[np.ndarray, int]:
    """Index entries of the whole, valid messages from ``position``; and where they stop.
    Each chunk's entries become an array at once: Python tuples of a whole segment's
    messages would take about 200 bytes a message (3 GB for a 1 GiB segment of the smallest
    messages), the arrays 16."""
    parts: list[np.ndarray] = []
    rel = first_rel
    want = SCAN_CHUNK_BYTES
    while position + HEADER_BYTES <= log_size:
        chunk = io.pread(fd, min(want, log_size - position), position)
        rows: list[tuple[int, int, int]] = []
        used, rel, need = _scan_chunk(chunk, position, start_offset, rel, rows)
        parts.append(_entries(rows))
        if used == 0 and need == 0:
            break
        if used == 0:
            if position + need > log_size:
                break
            want = need
        else:
            want = SCAN_CHUNK_BYTES
        position += used
    return (np.concatenate(parts) if parts else _entries([])), position


def _entries(rows: list[tuple[int, int, int]]) -> np.ndarray:
    """(relative offset, end position, timestamp) rows as index entries."""
    out = np.array(rows, dtype=np.uint64).reshape(-1, 3)
    entries = np.empty(len(rows), dtype=INDEX_DTYPE)
    entries["offset"], entries["position"], entries["timestamp"] = out.T
    return entries


def _scan_chunk(chunk: bytes, base: int, start_offset: int, rel: int,
                rows: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    """Accept messages from ``chunk``: (bytes used, next rel, bytes needed to go on).

    ``need`` is 0 when the next message is invalid (stop; also one declaring more than
    ``MAX_MESSAGE_BYTES``, which is never read), else the size of a message that did not fit
    in the chunk.
    """
    view = memoryview(chunk)
    p = 0
    digest = xxhash.xxh3_64_intdigest
    while p + HEADER_BYTES <= len(chunk):
        offset, timestamp = _OFFSET_TS.unpack_from(chunk, p + 24)
        user_headers, payload = _LENGTHS.unpack_from(chunk, p + 48)
        size = HEADER_BYTES + payload + user_headers
        if offset != start_offset + rel or size > MAX_MESSAGE_BYTES:
            return p, rel, 0
        if p + size > len(chunk):
            return p, rel, size
        if _CHECKSUM.unpack_from(chunk, p)[0] != digest(view[p + 8:p + size]):
            return p, rel, 0
        p += size
        rows.append((rel, base + p, timestamp))
        rel += 1
    return p, rel, HEADER_BYTES if p == 0 else 0


def whole_batches(tail: np.ndarray, original: np.ndarray, indexed_timestamp: int | None,
                  trust_log: bool) -> int:
    """How many scanned ``tail`` entries (after the kept index) belong to whole batches: all
    but the last run of equal timestamps, which is kept only when the index file had an
    entry for one of its messages (its commit record; ``indexed_timestamp`` is the last
    kept one's) or ``trust_log`` (no index file, or a sealed segment)."""
    n = len(tail)
    if n == 0 or trust_log:
        return n
    stamps = tail["timestamp"]
    if indexed_timestamp is not None and int(stamps[-1]) == indexed_timestamp:
        return n
    run = int(np.searchsorted(stamps, stamps[-1], side="left"))
    first = int(tail["offset"][run])
    known = original[first:first + n - run]
    if len(known) and (known == tail[run:run + len(known)]).any():
        return n
    return run


def drop_unfinished_batch(index: SegmentIndex, original: np.ndarray) -> None:
    """Cut the last batch of ``index`` when the original index names more messages of it
    than the log holds (entries past the log: the batch is torn in the log)."""
    n = index.count
    if n == 0 or n >= len(original) or int(original["offset"][n]) != n:
        return
    last = int(index.timestamps[-1])
    if int(original["timestamp"][n]) == last:
        index.truncate(int(np.searchsorted(index.timestamps, last, side="left")))


def recover(io: IoBackend, log_fd: int, index_fd: int, index: SegmentIndex,
            start_offset: int, trust_log: bool = False) -> RecoveryReport:
    """Make ``index`` (already loaded from the file) and the log files agree, whole batches
    only; ``trust_log`` keeps every whole record (no index file, or a sealed segment).
    See the module doc."""
    log_size = io.size(log_fd)
    original = index.entries.copy()
    keep = sound_prefix(index, log_size)
    while keep > 0 and not header_agrees(io, log_fd, index, keep - 1, start_offset):
        keep -= 1
    if not trust_log:
        keep = checksummed_prefix(io, log_fd, index, keep)
    index.truncate(keep)
    position = index.start_of(keep) if keep else 0
    tail, _ = scan_log(io, log_fd, position, log_size, start_offset, keep)
    last_indexed = int(index.timestamps[-1]) if keep else None
    tail = tail[:whole_batches(tail, original, last_indexed, trust_log)]
    index.append(tail)
    drop_unfinished_batch(index, original)
    valid_end = index.start_of(index.count)
    if valid_end < log_size:
        io.truncate(log_fd, valid_end)
    same = min(keep, index.count)  # entries unchanged from the file
    if index.count != same or same != len(original) \
            or io.size(index_fd) != index.count * INDEX_ENTRY_BYTES:
        io.truncate(index_fd, same * INDEX_ENTRY_BYTES)
        if index.count > same:
            io.pwrite(index_fd, index.entries[same:].tobytes(), same * INDEX_ENTRY_BYTES)
    return RecoveryReport(index_entries_dropped=len(original) - same,
                          index_entries_added=index.count - same,
                          log_bytes_truncated=log_size - valid_end)
