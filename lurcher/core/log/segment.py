"""One segment: a ``.log`` file of messages in wire form and its ``.index`` file.

Files are named by the segment's start offset, 20 digits zero-padded (wire-protocol §17).
Invariants: the log holds ``count`` whole messages with offsets start..start+count-1;
``index`` has one entry per message whose END position is where the message ends in the log;
``size_bytes`` equals the log's length. Appends write the log bytes with one positional write
and then the index entries with one positional write (the index entries are the batch's
commit record, see ``recovery``), then update the in-memory index.
A segment holds no descriptor: it borrows ``FileHandle``s from the shard's
``DescriptorCache`` for each operation, so descriptors stay bounded.

Reserve-ahead (``system.segment.reserve_ahead``): a write that extends a file makes the file
system find and account blocks for every new page; into blocks reserved beforehand with
``fallocate(FALLOC_FL_KEEP_SIZE)`` the same page-cache copy costs about a third less (here:
about 210 against 150 us per MiB). So a partition that writes big batches asks, with the
submission of a batch, for blocks past the log's end: a step of 16 such batches (at least
1 MiB, so small batches never ask; at most ``reserve_ahead``), once the batch's end came
within half a step of what is reserved. The file's size does not change (readers, recovery
and ``size_bytes`` never see the reservation); a reservation that fails (full disk) is
ignored and the write reports the error as before. A step never goes past the segment size,
where the segment is sealed, so a sealed segment has none left; the open one gives what it
did not write back at close (a same-size truncate, only with no write in flight: one could
land past the cut), and a cut log loses it with the cut. After a crash ``load`` finds blocks
past the end (``blocks_past_end``) and gives them back at once.
"""

from __future__ import annotations

import logging
import os

import msgspec

from lurcher.core.log.files import DescriptorCache, FileHandle
from lurcher.core.log.index import SegmentIndex
from lurcher.core.log.io import Reserve
from lurcher.core.log.recovery import RecoveryReport, recover
from lurcher.core.wire.batch import HEADER_BYTES, INDEX_ENTRY_BYTES
from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.units import U64_MAX, decimal

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
OFFSET_DIGITS = 20
RESERVE_MIN_BYTES = 1024 * 1024  # a smaller step is not worth its system call
RESERVE_BATCHES = 16  # a step covers this many batches of the size that asked for it

log = logging.getLogger(__name__)


def segment_file_name(start_offset: int, suffix: str) -> str:
    return f"{start_offset:0{OFFSET_DIGITS}d}{suffix}"


def number_in_name(stem: str) -> int | None:
    """The u64 a segment or stored-offset file is named by (ASCII decimal digits), else None
    (``str.isdigit`` also accepts other digits, which ``int`` then refuses or reads)."""
    return decimal(stem, U64_MAX)


METADATA_SLACK = 16 * 1024
"""Blocks a file may hold past its last 4 KiB block without a reservation: ext4's extent
tree blocks, one 4 KiB block per 340 extents, count in ``st_blocks`` too."""


def blocks_past_end(fd: int, slack: int = METADATA_SLACK) -> bool:
    """The file has more than ``slack`` bytes of blocks past its last 4 KiB block (a
    reservation, or the rest of one)."""
    st = os.fstat(fd)
    return st.st_blocks * 512 > -(-st.st_size // 4096) * 4096 + slack


class Segment:
    """A segment's files and in-memory index."""

    __slots__ = ("start_offset", "log_path", "index_path", "files", "size_bytes", "index",
                 "sealed", "dirty", "index_missing", "reserved_to", "uncreated", "seal_synced")

    def __init__(self, directory: str, start_offset: int, files: DescriptorCache,
                 create: bool = True) -> None:
        """Create both files when absent (log first, then index, before any write); the
        index starts empty: call ``load``. Raises OSError. ``create=False`` (a new, empty
        segment whose files could not be created yet) leaves that to the first
        ``log_file``/``index_file`` call."""
        self.start_offset = start_offset
        self.log_path = os.path.join(directory, segment_file_name(start_offset, LOG_SUFFIX))
        self.index_path = os.path.join(directory, segment_file_name(start_offset, INDEX_SUFFIX))
        self.files = files
        self.index_missing = os.path.exists(self.log_path) and not os.path.exists(self.index_path)
        self.uncreated = True
        if create:
            self._create_files()
        self.size_bytes = 0
        self.index = SegmentIndex()
        self.sealed = False
        self.dirty = False
        self.seal_synced = False  # fsynced as it is now, ready to be sealed (enforce_fsync)
        self.reserved_to = 0  # the log's blocks up to here are reserved (module docstring)

    @property
    def io(self):
        return self.files.io

    def _create_files(self) -> None:
        self.files.get(self.log_path, create=True)
        self.files.get(self.index_path, create=True)
        self.uncreated = False

    def log_file(self) -> FileHandle:
        """The log's handle: keep it in a local while using its ``fd``. Raises OSError."""
        if self.uncreated:
            self._create_files()
        return self.files.get(self.log_path)

    def index_file(self) -> FileHandle:
        if self.uncreated:
            self._create_files()
        return self.files.get(self.index_path)

    def load(self, sealed: bool = False) -> RecoveryReport:
        """Read the index file and reconcile it with the log (see ``recovery``).

        ``sealed``: a later segment exists, so this one's last batch was finished before
        it was created: whole records of the log are trusted even without index entries.
        Only the entries the log can hold (a message is at least ``HEADER_BYTES``) are
        read: a longer index (zeros or another file's bytes past them) is cut to them."""
        log, idx = self.log_file(), self.index_file()
        index_bytes = self.io.size(idx.fd)
        most = self.io.size(log.fd) // HEADER_BYTES * INDEX_ENTRY_BYTES
        raw = self.io.pread(idx.fd, min(index_bytes, most), 0)
        self.index = SegmentIndex.from_bytes(raw)
        report = recover(self.io, log.fd, idx.fd, self.index, self.start_offset,
                         trust_log=self.index_missing or sealed)
        unread = (index_bytes - len(raw)) // INDEX_ENTRY_BYTES
        if unread:
            report = msgspec.structs.replace(
                report, index_entries_dropped=report.index_entries_dropped + unread)
        self.index_missing = False
        self.size_bytes = self.io.size(log.fd)
        if blocks_past_end(log.fd):  # reserved before a crash
            self._give_back_blocks()
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
        log, idx = self.log_file(), self.index_file()
        try:
            self.io.append_pair(log.fd, blob, self.size_bytes, idx.fd, index_entries,
                                self.index.count * INDEX_ENTRY_BYTES, fsync)
        except OSError:
            self.cut_back()
            raise
        self.commit(len(blob), index_entries, dirty=not fsync)

    def commit(self, blob_bytes: int, index_entries: Buffer, dirty: bool = True) -> None:
        """Take a written batch into the in-memory state (index, size): readers see it."""
        self.index.append(index_entries)
        self.size_bytes += blob_bytes
        self.dirty = dirty
        self.seal_synced = False

    def reservation(self, end: int, batch_bytes: int, ahead: int, limit: int) -> Reserve:
        """What to reserve with the batch of ``batch_bytes`` that ends at ``end`` (position,
        length), or None; ``ahead`` is the largest step, ``limit`` the segment size. See the
        module docstring."""
        step = min(ahead, RESERVE_BATCHES * batch_bytes)
        if step < RESERVE_MIN_BYTES or end + step // 2 <= self.reserved_to:
            return None
        start = max(self.reserved_to, end)
        stop = min(start + step, limit)
        if stop <= start:
            return None
        self.reserved_to = stop
        return start, stop - start

    def release_reservation(self) -> None:
        """Give back the blocks reserved past the log's end at close (only when nothing is
        being written to it). A failure is logged: the blocks stay with the file until it
        is deleted."""
        reserved, self.reserved_to = self.reserved_to, 0
        if reserved > self.size_bytes:
            self._give_back_blocks()

    def _give_back_blocks(self) -> None:
        """Free the log's blocks past its end (a same-size truncate)."""
        try:
            self.io.truncate(self.log_file().fd, self.size_bytes)
        except OSError as exc:
            log.warning("segment %s: cannot give back its reserved blocks: %s",
                        self.log_path, exc)

    def cut_back(self) -> None:
        """Truncate both files to the accepted state (shrinking needs no free space): what
        failed or unfinished appends left past it goes. A failure is logged (recovery cuts
        what the index does not vouch for)."""
        self.reserved_to = 0  # the truncate gives them back
        self.seal_synced = False
        try:
            log_file, index_file = self.log_file(), self.index_file()
            self.io.truncate(log_file.fd, self.size_bytes)
            self.io.truncate(index_file.fd, self.index.count * INDEX_ENTRY_BYTES)
        except OSError as exc:
            log.error("segment %s: cannot cut a failed append off: %s", self.log_path, exc)

    def truncate_to(self, count: int) -> None:
        """Keep only the first ``count`` messages: cut the log, the index file and the
        in-memory index (shrinking needs no free space). Raises OSError."""
        count = min(count, self.index.count)
        keep_bytes = self.index.end_of(count - 1) if count else 0
        log, idx = self.log_file(), self.index_file()
        self.reserved_to = 0  # the truncate gives them back
        self.io.truncate(idx.fd, count * INDEX_ENTRY_BYTES)  # the commit records go first
        self.io.truncate(log.fd, keep_bytes)
        self.index.truncate(count)
        self.size_bytes = keep_bytes
        self.seal_synced = False

    def fsync(self) -> None:
        """fsync both files (on the caller's thread); the segment is then ``seal_synced``.
        Raises OSError."""
        for handle in self.handles():
            self.io.fsync(handle.fd)
        self.synced()

    def synced(self) -> None:
        """Both files were just fsynced (here or by a worker): clean, ready to be sealed."""
        self.dirty = False
        self.seal_synced = True

    def handles(self) -> list[FileHandle]:
        """Both files' handles (log, index), e.g. for a caller that fsyncs them later."""
        return [self.log_file(), self.index_file()]

    def seal(self) -> None:
        """A later segment exists: this one takes no more appends (until a cut makes it the
        open one again), and its index gives back its spare capacity."""
        self.sealed = True
        self.index.compact()

    # -- reading -------------------------------------------------------------------------

    def byte_range(self, first: int, last: int) -> tuple[int, int]:
        """(position, length) in the log of entries ``first..last`` (inclusive, relative)."""
        start = self.index.start_of(first)
        return start, self.index.end_of(last) - start

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Give both files back to the cache (closed once no reader holds them)."""
        self.files.forget(self.log_path)
        self.files.forget(self.index_path)

    def delete(self) -> None:
        """Close and remove both files (a reply still sending from them keeps its handle)."""
        self.close()
        self.io.remove(self.log_path)
        self.io.remove(self.index_path)
