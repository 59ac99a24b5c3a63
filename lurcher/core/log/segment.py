"""One segment: a ``.log`` file of messages in wire form and its ``.index`` file.

Files are named by the segment's start offset, 20 digits zero-padded (wire-protocol §17).
Invariants: the log holds ``count`` whole messages with offsets start..start+count-1;
``index`` has one entry per message whose END position is where the message ends in the log;
``size_bytes`` equals the log's length. Appends write the log bytes with one positional write
and the index entries with one positional write, then update the in-memory index.
"""

from __future__ import annotations

import logging
import os

from lurcher.core.log.index import SegmentIndex
from lurcher.core.log.io import IoBackend
from lurcher.core.log.recovery import RecoveryReport, recover
from lurcher.core.wire.batch import INDEX_ENTRY_BYTES
from lurcher.core.wire.buffer import Buffer

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
OFFSET_DIGITS = 20

log = logging.getLogger(__name__)


def segment_file_name(start_offset: int, suffix: str) -> str:
    return f"{start_offset:0{OFFSET_DIGITS}d}{suffix}"


class Segment:
    """A segment's files and in-memory index."""

    __slots__ = ("start_offset", "log_path", "index_path", "log_fd", "index_fd",
                 "size_bytes", "index", "io", "sealed", "dirty")

    def __init__(self, directory: str, start_offset: int, io: IoBackend) -> None:
        """Open (creating when absent) the files; the index starts empty: call ``load``."""
        self.start_offset = start_offset
        self.log_path = os.path.join(directory, segment_file_name(start_offset, LOG_SUFFIX))
        self.index_path = os.path.join(directory, segment_file_name(start_offset, INDEX_SUFFIX))
        self.io = io
        self.log_fd = io.open(self.log_path)
        self.index_fd = io.open(self.index_path)
        self.size_bytes = 0
        self.index = SegmentIndex()
        self.sealed = False
        self.dirty = False

    def load(self) -> RecoveryReport:
        """Read the index file and reconcile it with the log (see ``recovery``)."""
        raw = self.io.pread(self.index_fd, self.io.size(self.index_fd), 0)
        self.index = SegmentIndex.from_bytes(raw)
        report = recover(self.io, self.log_fd, self.index_fd, self.index, self.start_offset)
        self.size_bytes = self.io.size(self.log_fd)
        return report

    # -- state ---------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return self.index.count

    @property
    def end_offset(self) -> int:
        """Offset of the last message (start_offset - 1 when empty)."""
        return self.start_offset + self.index.count - 1

    @property
    def next_offset(self) -> int:
        return self.start_offset + self.index.count

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the newest message (the largest: timestamps never decrease); 0 empty."""
        return int(self.index.timestamps[-1]) if self.index.count else 0

    @property
    def first_timestamp(self) -> int:
        """Timestamp of the oldest message; 0 when empty."""
        return int(self.index.timestamps[0]) if self.index.count else 0

    def is_expired(self, now_us: int, expiry_us: int) -> bool:
        """Every message is older than ``expiry_us`` at ``now_us`` (never for an empty one)."""
        return self.index.count > 0 and self.last_timestamp + expiry_us <= now_us

    def is_full(self, segment_size_bytes: int) -> bool:
        return self.size_bytes >= segment_size_bytes

    # -- writing -------------------------------------------------------------------------

    def append(self, blob: Buffer, index_entries: bytes, fsync: bool = False) -> None:
        """Write the messages and their index entries (positions already absolute), and
        fsync both when ``fsync``.

        Raises OSError; on failure the segment's state is unchanged and the files are cut
        back to it, so no part of a failed batch (whole messages written before the index
        write failed, e.g. on a full disk) can reappear after a restart.
        """
        index_bytes = self.index.count * INDEX_ENTRY_BYTES
        try:
            self.io.append_pair(self.log_fd, blob, self.size_bytes, self.index_fd,
                                index_entries, index_bytes, fsync)
        except OSError:
            self._cut_back(index_bytes)
            raise
        self.index.append(index_entries)
        self.size_bytes += len(blob)
        self.dirty = not fsync

    def _cut_back(self, index_bytes: int) -> None:
        """Truncate both files to the accepted state (shrinking needs no free space)."""
        try:
            self.io.truncate(self.log_fd, self.size_bytes)
            self.io.truncate(self.index_fd, index_bytes)
        except OSError as exc:  # recovery cuts what the index does not vouch for
            log.error("segment %s: cannot cut a failed append off: %s", self.log_path, exc)

    def fsync(self) -> None:
        self.io.fsync(self.log_fd)
        self.io.fsync(self.index_fd)
        self.dirty = False

    # -- reading -------------------------------------------------------------------------

    def byte_range(self, first: int, last: int) -> tuple[int, int]:
        """(position, length) in the log of entries ``first..last`` (inclusive, relative)."""
        start = self.index.start_of(first)
        return start, self.index.end_of(last) - start

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close both files (idempotent)."""
        for name in ("log_fd", "index_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                self.io.close(fd)
                setattr(self, name, -1)

    def delete(self) -> None:
        """Close and remove both files."""
        self.close()
        self.io.remove(self.log_path)
        self.io.remove(self.index_path)
