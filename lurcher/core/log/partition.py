"""A partition: one directory of segments plus its stored consumer offsets.

Owns: the ordered list of segments (the last one is open for appends, the others sealed),
the next offset to assign, the counters, the consumer offsets, and its ``AppendPipeline``
(batches stamped and submitted but not yet written). Only the owning shard calls it, on its
event loop; ``append_async`` returns a future and ``seal_async`` calls back, every other
method is synchronous.

Invariants: offsets are dense and increase by one per message across segments; segment i+1
starts at segment i's next offset; ``next_offset`` = open segment's next offset; index
timestamps increase strictly from batch to batch and are equal within one (the batch
timestamp is max(clock, last timestamp + 1)): recovery tells batches apart by them.
Descriptors: segments borrow them from ``files`` (a bounded cache shared by the shard).
Unsynced segments: no segment before the one holding ``_unsynced_from`` is ``dirty`` (written
since its last fsync): a segment gets written only as the open one, each write and each failed
flush lowers it to that segment, and a take of the dirty ones (a group-commit round, a flush)
raises it to the open one; so a round visits the segments rolled over since the last one,
not every segment the partition holds. Retention bisects and stops early likewise.
Visible state (``next_offset``, counters, segment indexes: what polls, stats and group
commit see) holds written batches only; batches in flight are counted apart
(``_pending_count``/``_pending_bytes``) and stamped after them, so polls never return
unwritten bytes. A segment rolls over only when nothing is in flight.
Durability: ``append`` returns, and ``append_async``'s future resolves, once the bytes are in
the kernel (positional writes, nothing buffered in Python); ``append`` with
``enforce_fsync`` (no group commit) also after fsync of log and index.
With group commit the caller reports each successful fsync (``synced_to``) and each failed
one (``fail_storage``); a segment created since the caller's last round has the caller fsync
the directory too (``take_unsynced_directory``: a new file's name is on the device only
then). After a failed fsync the page cache is suspect (the kernel may have
dropped the dirty pages it could not write and report success next time: "fsyncgate"), so the
partition cuts its log back to the last synced offset (nothing unacknowledged stays) and
refuses every later append with CANNOT_WRITE_TO_FILE until it is reopened (server restart),
when recovery reads what is really on the device. With ``enforce_fsync`` any failed fsync
of its segment files counts (a client's FlushUnsavedBuffer too): a later fsync of the same
files may succeed without the lost pages. A partition whose directory is gone (moved aside
for its deletion before its shard closes it) answers PARTITION_NOT_FOUND to whatever needs
a file it does not hold open (``_refuse_if_deleted``). A purge starts a new ``epoch``: a
group-commit round begun before it reports nothing about the new files (``synced_to``), and
the last synced offset starts at 0. A purge is all or nothing per partition: its segment
files are renamed aside (``PURGED_SUFFIX``) before any is removed, and such a file left
behind is removed at the next open, never read as a segment. Across a crash too: a marker
file (``PURGE_MARKER``) is created before the purge changes anything and set aside once
every stored offset is removed and every segment file set aside; an open that finds it
finishes the purge first (every segment file and stored offset removed), or fails with
``PurgeUnfinished`` (one line; the marker stays) when it cannot. The files set
aside are removed on the backend's worker thread, never on the event loop, and the purge
is answered after that. With ``enforce_fsync`` the marker is on the device before the
first change, and the directories after the last one, before the marker goes and the purge
is answered. The server's purge (``purge_async``) makes, fsyncs and sets aside its marker
and fsyncs the directories on that worker thread too, one purge of a partition at a time;
sends that come while it finishes on disk wait for it (``_finishing``). Segment deletions
(DeleteSegments, retention) set the oldest segments' files aside the same way, all or
nothing, and remove them on the worker thread too (``set_oldest_segments_aside``); with
``enforce_fsync`` the directory is fsynced there first, after the renames.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import logging
import math
import operator
import os
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np

from lurcher.core.log.appends import AppendPipeline, PendingAppend
from lurcher.core.log.cache_window import CacheWindow
from lurcher.core.log.history_reads import HistoryReads
from lurcher.core.log.config import Clock, LogConfig, wall_clock_us
from lurcher.core.log.files import DescriptorCache, FileHandle
from lurcher.core.log.inline import PROCESS_GATE
from lurcher.core.log.io import FSYNC_THREAD, Done, IoBackend, PosixIo, is_no_space
from lurcher.core.log.offsets import (KINDS, ConsumerOffsets, OffsetKind, offset_dirs,
                                      remove_stored_offsets)
from lurcher.core.log.recovery import RecoveryReport, SegmentMisnamed, first_message_offset
from lurcher.core.log.segment import (INDEX_SUFFIX, LOG_SUFFIX, OFFSET_DIGITS, Segment,
                                      number_in_name, segment_file_name)
from lurcher.core.log.slice import EMPTY, ByteRange, PolledSlice
from lurcher.core.wire.batch import INDEX_ENTRY_BYTES, MessageBatch
from lurcher.core.wire.values.polling import PollingKind
from lurcher.core.wire.buffer import U32_MAX
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

PURGED_SUFFIX = ".purged"
"""Appended to a segment file's name by a purge or a segment deletion before the file is
removed (off the event loop)."""

_START_OFFSET = operator.attrgetter("start_offset")  # what segments bisect by, in order
_END_OFFSET = operator.attrgetter("end_offset")  # never decreases from segment to segment

PURGE_MARKER = "purging"
"""A file in a partition directory while a purge of it is under way (see ``purge``)."""

T = TypeVar("T")


# The wire's polling strategies (one enum, ``core.wire.values.polling``), by the name the
# storage layer has always used.
PollKind = PollingKind


def _segment_starts(path: str) -> list[int]:
    """Start offsets of the segments in ``path`` (their .log files named by a u64)."""
    stems = [n[:-len(LOG_SUFFIX)] for n in os.listdir(path) if n.endswith(LOG_SUFFIX)]
    starts = [number_in_name(s) if len(s) == OFFSET_DIGITS else None for s in stems]
    return sorted(start for start in starts if start is not None)


def _refuse_misnamed(path: str, starts: list[int], io: IoBackend) -> None:
    """Raise SegmentMisnamed when a segment's log begins with a whole message (checksum
    verified) of another offset than its name: renamed or copied by hand. Reads only, before
    anything is recovered, so a refused start changes no file (recovery would cut such a
    segment to nothing, and a stray file after the open segment would make it count as
    sealed)."""
    for start in starts:
        log_path = os.path.join(path, segment_file_name(start, LOG_SUFFIX))
        fd = io.open(log_path, create=False)
        try:
            found = first_message_offset(io, fd, io.size(fd))
        finally:
            io.close(fd)
        if found is not None and found != start:
            raise SegmentMisnamed(f"{log_path} begins with message {found}, not {start}: "
                                  f"renamed or copied by hand? Put the right file back or "
                                  f"move it away")


def _remove_leftovers(path: str, io: IoBackend) -> None:
    """Remove the .index files without their .log (a crash between creating a segment's
    two files, or a deletion between setting them aside), and the files a purge set aside but
    could not remove (``PURGED_SUFFIX``; one that still cannot be is logged and left: it is
    never read). Raises OSError when an orphan index cannot be removed."""
    names = os.listdir(path)
    logs = {n[:-len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
    for n in names:
        if n.endswith(INDEX_SUFFIX) and n[:-len(INDEX_SUFFIX)] not in logs:
            io.remove(os.path.join(path, n))
    _remove_set_aside([os.path.join(path, n) for n in names if n.endswith(PURGED_SUFFIX)], io)


class PurgeUnfinished(OSError):
    """An interrupted purge that the open cannot finish (a file that cannot be removed): the
    partition is not opened, and the start is refused with this one line."""


def _finish_interrupted_purge(path: str, io: IoBackend) -> None:
    """When a purge was interrupted (its ``PURGE_MARKER`` is there: the process died before
    the purge was done), finish it: remove every segment file, set aside or not, and every
    stored offset, fsync the directories, then set the marker aside (``_remove_leftovers``
    removes it). Raises PurgeUnfinished (the marker stays: the next open goes on)."""
    marker = os.path.join(path, PURGE_MARKER)
    if not os.path.exists(marker):
        return
    log.warning("%s: a purge was interrupted (crash); finishing it: every message and "
                "stored offset of the partition is removed", path)
    try:
        _remove_purged_files(path, io, marker)
    except OSError as exc:
        raise PurgeUnfinished(f"{path}: cannot finish an interrupted purge ({exc}); the "
                              f"partition is not opened until it can") from None


def _remove_purged_files(path: str, io: IoBackend, marker: str) -> None:
    """The work of ``_finish_interrupted_purge``. Raises OSError."""
    suffixes = (LOG_SUFFIX, INDEX_SUFFIX, PURGED_SUFFIX)
    for name in os.listdir(path):
        if name.endswith(suffixes):
            io.remove(os.path.join(path, name))
    remove_stored_offsets(path, io)
    _sync_purged_dirs(path, io)
    _unmark_purge(marker, path, io, durable=True)


def _mark_purge(path: str, io: IoBackend, durable: bool) -> str:
    """Create the purge marker of the partition in ``path`` (with ``durable`` fsynced, and
    its directory entry too); its path. Raises OSError (the marker may then be there)."""
    marker = os.path.join(path, PURGE_MARKER)
    fd = io.open(marker)
    try:
        if durable:
            io.fsync_in_worker(fd)  # this runs on a worker thread (``purge_async``)
    finally:
        io.close(fd)
    if durable:
        io.sync_directory(path)
    return marker


def _drop_marker_of_failed_purge(marker: str | None, path: str, io: IoBackend,
                                 durable: bool) -> None:
    """Remove the marker (None: none was made) of a purge that changed nothing; one that
    stays is logged (the next start then finishes the purge)."""
    if marker is None:
        return
    try:
        aside = _unmark_purge(marker, path, io, durable)
    except FileNotFoundError:  # gone with its directory (the partition was deleted)
        return
    except OSError as exc:
        log.error("%s: the marker of a purge that failed cannot be removed (%s): the next "
                  "start purges the partition", path, exc)
        return
    _remove_set_aside([aside], io)


def _finish_on_disk(marker: str | None, path: str, io: IoBackend, durable: bool) -> list[str]:
    """Once every file of a purge is set aside (the marker has done its work: what is set
    aside is removed at any open): with ``durable`` fsync the directories, then set the
    marker (if made) aside; the files to remove with the others. Raises OSError."""
    if durable:
        _sync_purged_dirs(path, io)
    return [] if marker is None else [_unmark_purge(marker, path, io, durable)]


def _unmark_purge(marker: str, path: str, io: IoBackend, durable: bool) -> str:
    """Rename the purge marker aside (``PURGED_SUFFIX``: removed with the files the purge
    set aside, off the event loop, or at the next open); with ``durable`` the rename is on
    the device on return. Returns the new name. Raises OSError."""
    aside = marker + PURGED_SUFFIX
    io.replace(marker, aside)
    if durable:
        io.sync_directory(path)
    return aside


def _sync_purged_dirs(path: str, io: IoBackend) -> None:
    """fsync the partition directory and its stored offsets' directories: a purge's renames
    and removals are on the device on return. Raises OSError."""
    for directory in [path, *offset_dirs(path)]:
        io.sync_directory(directory)


def _set_aside(paths: list[str], io: IoBackend) -> list[str]:
    """Rename each file to its name + ``PURGED_SUFFIX`` (a name recovery never opens as a
    segment); a missing one is skipped. Returns the new names. Raises OSError after
    renaming back the ones already renamed: then nothing has changed."""
    moved: list[str] = []
    try:
        for path in paths:
            try:
                io.replace(path, path + PURGED_SUFFIX)
            except FileNotFoundError:
                continue
            moved.append(path)
    except OSError:
        _put_back(moved, io)
        raise
    return [path + PURGED_SUFFIX for path in moved]


def _put_back(paths: list[str], io: IoBackend) -> None:
    """Undo ``_set_aside`` for ``paths``; a file that cannot be renamed back is logged (it
    is removed at the next start)."""
    for path in reversed(paths):
        try:
            io.replace(path + PURGED_SUFFIX, path)
        except OSError as exc:
            log.error("%s set aside for a deletion that failed and cannot be put back (%s): "
                      "its messages are lost at the next start", path, exc)


def _remove_set_aside(paths: list[str], io: IoBackend) -> None:
    """Remove the files a purge or a segment deletion set aside; one that stays is logged
    (removed at the next start, ``_remove_leftovers``)."""
    for path in paths:
        try:
            io.remove(path)
        except OSError as exc:
            log.warning("%s deleted, but not removed (%s): removed at the next start",
                        path, exc)


def _in_worker(io: IoBackend, job: Callable[[], T]) -> asyncio.Future[T]:
    """Run ``job`` on the backend's worker thread (``run_in_worker``, after the writes
    submitted before it); a future of its result or its OSError."""
    future = asyncio.get_running_loop().create_future()
    results: list[T] = []

    def done(error: OSError | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(results[0])
        else:
            future.set_exception(error)

    io.run_in_worker(lambda: results.append(job()), done)
    return future


def _off_loop(io: IoBackend, job: Callable[[], object]) -> asyncio.Future | None:
    """``_in_worker(io, job)`` when an event loop runs; without one (tools, start-up) ``job``
    runs here and now, and None is returned."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        job()
        return None
    return _in_worker(io, job)


def _pass_outcome(source: asyncio.Future, target: asyncio.Future) -> None:
    """Give ``target`` (unless already done) the outcome of ``source``, done."""
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())


def _sync_after_removals(path: str, io: IoBackend) -> None:
    """fsync the directory ``path`` after segment removals; a failure is logged (see
    ``Partition._sync_removals``)."""
    try:
        io.sync_directory(path)
    except OSError as exc:
        log.error("partition %s: segments deleted, but the directory fsync failed (%s): a "
                  "power loss may bring them back", path, exc)


def _delete_files(segment: Segment) -> None:
    """Remove a segment's files (``truncate_to``: the newest ones, on the event loop).
    Raises OSError while its log file is still there; an index file left alone is logged
    and removed at the next open (``_remove_leftovers``)."""
    try:
        segment.delete()
    except OSError as exc:
        if os.path.exists(segment.log_path):
            raise
        log.warning("%s removed, but not its index (%s): removed at the next start",
                    segment.log_path, exc)


class Partition:
    """Segments and stored offsets of one partition directory."""

    def __init__(self, path: str, partition_id: int, config: LogConfig, files: DescriptorCache,
                 clock: Clock, created_at_us: int) -> None:
        """Use ``Partition.open``."""
        self.path = path
        self.partition_id = partition_id
        self.config = config
        self.files = files
        self.io = io = files.io
        self.clock = clock
        self.created_at = created_at_us
        self.segments: list[Segment] = []
        self.offsets = ConsumerOffsets(path, io, fsync=config.enforce_fsync)
        self.recovery: dict[int, RecoveryReport] = {}
        self.next_offset = 0
        self.messages_count = 0
        self.size_bytes = 0
        self._last_timestamp = 0
        self.synced_next_offset = 0
        self.epoch = 0  # purges so far (see ``synced_to``)
        self.storage_failure: str | None = None
        self._purge_turn = asyncio.Lock()  # one ``purge_async`` at a time
        self._finishing: asyncio.Future | None = None  # a purge's last disk work (sends wait)
        self._rotation_failure: str | None = None  # the last one logged (``_segment_for``)
        self.closed = False
        self._pending_count = 0  # messages stamped but not yet written (in flight)
        self._pending_bytes = 0
        self._directory_unsynced = False  # a segment file created since the last round
        self._unsynced_from = 0  # no segment before the one holding it is dirty (docstring)
        self.pipeline = AppendPipeline(config.max_inflight_batches)
        self.inline_gate = PROCESS_GATE
        self.cache_window = CacheWindow(0, list)  # set by ``open`` once the segments are loaded
        self.history_reads = HistoryReads()

    @classmethod
    def open(cls, path: str, partition_id: int, config: LogConfig | None = None,
             io: IoBackend | None = None, clock: Clock = wall_clock_us,
             created_at_us: int | None = None,
             files: DescriptorCache | None = None) -> Partition:
        """Open (creating when absent) and recover the partition in ``path``.

        ``files``: the descriptor cache to borrow from (a private one over ``io`` when
        None). Recovery per segment: the index is reconciled with the log, a torn tail or
        unfinished batch is cut (``self.recovery`` says what changed). Raises OSError.
        """
        os.makedirs(path, exist_ok=True)
        files = DescriptorCache(io or PosixIo()) if files is None else files
        created = clock() if created_at_us is None else created_at_us
        part = cls(path, partition_id, config or LogConfig(), files, clock, created)
        _finish_interrupted_purge(path, files.io)
        starts = _segment_starts(path)
        _refuse_misnamed(path, starts, files.io)
        _remove_leftovers(path, files.io)
        starts = starts or [0]
        for start in starts:
            segment = Segment(path, start, files)
            part.recovery[start] = segment.load(sealed=start != starts[-1])
            part._add_segment(segment)
        part._report_recovery()
        part.offsets.load()
        if part.config.cap_stored_offsets:
            part._cap_stored_offsets()
        part.synced_next_offset = part.next_offset
        part._unsynced_from = part.segments[-1].start_offset  # none is dirty yet
        part.cache_window = CacheWindow(part.config.page_cache_window, part._segments_getter())
        return part

    def _report_recovery(self) -> None:
        """Log what recovery cut or rebuilt, and offsets missing between two segments (a
        sealed segment that lost its tail: reads skip them, ``read_offset``), and a segment
        that starts inside the one before (a file made by hand: a segment only ever starts
        where the one before ends, and recovery never grows one; reads from its start on
        come from it, so the earlier segment's messages past that point are not served)."""
        for start, report in self.recovery.items():
            if report.changed:
                log.warning("%s: segment %d recovered: %d index entries dropped, %d rebuilt "
                            "from the log, %d log bytes cut", self.path, start,
                            report.index_entries_dropped, report.index_entries_added,
                            report.log_bytes_truncated)
        for before, after in zip(self.segments, self.segments[1:]):
            if before.next_offset > after.start_offset:
                log.error("%s starts at offset %d, inside %s (to %d): made by hand? Its "
                          "messages hide those of the segment before; move it away",
                          after.log_path, after.start_offset, before.log_path,
                          before.end_offset)
            elif before.next_offset < after.start_offset:
                log.warning("%s: offsets %d to %d are not stored (segment %d ends before "
                            "segment %d starts)", self.path, before.next_offset,
                            after.start_offset - 1, before.start_offset, after.start_offset)

    def _cap_stored_offsets(self) -> None:
        """Lower each stored consumer offset past the last stored message to it (remove it
        when the partition never stored one): recovery cut the log below it, later sends
        reuse those offsets, and the consumer would skip them. A store never leaves an
        offset there (INVALID_OFFSET), so only recovery does. Not for a replicated
        partition (``LogConfig.cap_stored_offsets``): its group gives the cut messages back
        at the same offsets, and an offset it stored before them (an op applied ahead of
        the append it follows) is right."""
        last = self.next_offset - 1
        for kind in KINDS:
            for key, offset in self.offsets.items(kind).items():
                if offset <= last:
                    continue
                change = "lower" if last >= 0 else "delete"
                log.warning("%s: %s %d stored offset %d is past the last stored message "
                            "(%d): %s it", self.path, kind, key, offset, last, change)
                pending = (self.offsets.store(kind, key, last) if last >= 0
                           else self.offsets.delete(kind, key))
                if pending is not None:
                    pending.add_done_callback(lambda done, c=change, kind=kind, key=key:
                                              _log_failed_change(done, c, kind, key))

    def _segments_getter(self) -> Callable[[], list[Segment]]:
        """``self.segments`` as they are when called, without keeping ``self`` alive (a
        cycle would keep a dropped partition's descriptors open until the next GC)."""
        ref = weakref.ref(self)
        return lambda: part.segments if (part := ref()) is not None else []

    def _add_segment(self, segment: Segment) -> None:
        if self.segments:
            self.segments[-1].seal()
        self.segments.append(segment)
        self.next_offset = segment.next_offset
        self.messages_count += segment.count
        self.size_bytes += segment.size_bytes
        self._last_timestamp = max(self._last_timestamp, segment.last_timestamp)

    # -- counters ------------------------------------------------------------------------

    @property
    def current_offset(self) -> int:
        """Offset of the last message appended (0 when none ever was)."""
        return max(self.next_offset - 1, 0)

    @property
    def first_offset(self) -> int:
        """Offset of the oldest stored message (the first segment's start)."""
        return self.segments[0].start_offset

    @property
    def segments_count(self) -> int:
        return len(self.segments)

    # -- writing -------------------------------------------------------------------------

    def append(self, batch: MessageBatch) -> None:
        """Stamp ``batch`` (offsets from ``next_offset``, one timestamp) and store it,
        waiting for the write (tests, tools; the server uses ``append_async``). Only while
        no asynchronous append is in flight.

        The batch must be valid (``MessageBatch.validate``) with a writable blob.
        Raises IggyError INVALID_MESSAGES_COUNT (empty batch), CANNOT_WRITE_TO_FILE (the
        write failed, e.g. the disk is full; the partition and its files are unchanged).
        """
        assert self.pipeline.idle, "synchronous append while asynchronous ones are in flight"
        pending = self.stamp(batch)
        fsync = self.config.enforce_fsync and not self.config.group_commit
        try:
            pending.segment.append(pending.blob, pending.entries, fsync=fsync)
        except OSError as e:
            self._rewind()
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, str(e)) from e
        self._pending_count = self._pending_bytes = 0
        self._count_in(pending)

    def append_async(self, batch: MessageBatch) -> asyncio.Future | None:
        """Stamp and submit ``batch`` without waiting for the disk (see ``appends``): the
        future resolves once it is written (in the kernel), or fails with IggyError
        CANNOT_WRITE_TO_FILE (nothing of it is kept) or INVALID_MESSAGES_COUNT.

        A batch of at most ``config.inline_write_max_bytes`` that finds the partition idle
        is written at once (``append``, see ``inline``): returns None or raises. While a
        purge finishes on disk the batch waits for it (``_held_by_purge``)."""
        if self._finishing is not None:
            return self._held_by_purge(batch)
        if not self._inline(len(batch.blob)):
            return self.pipeline.submit(self, batch)
        gate = self.inline_gate
        started = gate.start()
        try:
            self.append(batch)
        finally:
            gate.finished(started, len(batch.blob))
        return None

    def _inline(self, nbytes: int) -> bool:
        """A batch of ``nbytes`` is written on the event loop (see ``inline``): small, the
        partition idle, the backend writing to the page cache, no fsync in ``append`` (with
        ``enforce_fsync`` only group commit, off the loop, syncs, and no segment to seal
        first), the process's gate open."""
        config = self.config
        return (nbytes <= config.inline_write_max_bytes and self.pipeline.idle
                and not self.pipeline.waiting and self.io.writes_to_page_cache
                and (config.group_commit or not config.enforce_fsync)
                and self.inline_gate.is_open()
                and not (config.enforce_fsync and self.seal_due(nbytes)))

    def stamp(self, batch: MessageBatch) -> PendingAppend:
        """Assign the batch its offsets and timestamp (its ``stamp_us`` if set, else the
        clock's; after everything stamped so far, written or in flight) and say where it
        goes. Raises IggyError (see ``append``; CANNOT_WRITE_TO_FILE also when a segment
        file cannot be opened)."""
        if batch.count == 0:
            raise IggyError(ErrorCode.INVALID_MESSAGES_COUNT, "empty batch")
        if self.storage_failure is not None:
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                            f"partition {self.partition_id} refuses writes after a failed "
                            f"fsync ({self.storage_failure}) until the server restarts")
        segment = self._segment_for(len(batch.blob))
        try:
            handles = (segment.log_file(), segment.index_file())
        except OSError as e:
            self._refuse_if_deleted(e)
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, str(e)) from e
        timestamp = max(batch.stamp_us or self.clock(), self._last_timestamp + 1)
        base = self.next_offset + self._pending_count
        batch.stamp(base, timestamp)
        position = segment.size_bytes + self._pending_bytes
        entries = batch.index_entries(position, base - segment.start_offset, timestamp)
        pending = PendingAppend(segment, batch.blob, entries, batch.count,
                                (position, (base - segment.start_offset) * INDEX_ENTRY_BYTES),
                                handles)
        self._pending_count += batch.count
        self._pending_bytes += len(batch.blob)
        self._last_timestamp = timestamp
        return pending

    def submit(self, pending: PendingAppend, done: Done) -> None:
        """Hand a stamped batch's two writes to the backend (``IoBackend.submit_pair``),
        with the log's next reservation when one is due (``Segment.reservation``) and, with
        ``enforce_fsync``, the start of their writeback."""
        log_file, index_file = pending.handles
        size = len(pending.blob)
        reserve = pending.segment.reservation(
            pending.log_position + size, size, self.config.reserve_ahead,
            self.config.segment_size_bytes) if self.config.reserve_ahead else None
        self.io.submit_pair(log_file.fd, pending.blob, pending.log_position, index_file.fd,
                            pending.entries, pending.index_position, done, reserve,
                            self.config.enforce_fsync)

    def commit(self, pending: PendingAppend) -> None:
        """A stamped batch is written (and every one before it): readers see it now."""
        self._pending_count -= pending.count
        self._pending_bytes -= len(pending.blob)
        pending.segment.commit(len(pending.blob), pending.entries)
        self._count_in(pending)

    def _count_in(self, pending: PendingAppend) -> None:
        self._unsynced_from = min(self._unsynced_from, pending.segment.start_offset)
        self.next_offset += pending.count
        self.messages_count += pending.count
        self.size_bytes += len(pending.blob)
        self.cache_window.committed(len(pending.blob))

    def _rewind(self) -> None:
        """Forget every stamped, unwritten batch; cut what they left in the open segment."""
        self._pending_count = self._pending_bytes = 0
        self.segments[-1].cut_back()
        self._restamp_last()

    def _restamp_last(self) -> None:
        """After cutting messages off: the next batch is stamped after the newest kept one
        (not after one cut off), as on a replica that never wrote the cut ones. Timestamps
        never decrease from segment to segment, so that is the newest segment holding
        messages, looked for from the newest (a failed write costs the same with 20,000
        segments as with 2)."""
        newest = next((s for s in reversed(self.segments) if s.count), None)
        self._last_timestamp = newest.last_timestamp if newest is not None else 0

    def settle(self) -> None:
        """After failed writes drained (``appends``): cut their bytes off, and after a
        failed fsync cut back to the last synced offset (see ``fail_storage``)."""
        self._rewind()
        if self.storage_failure is not None:
            self._cut_to_synced()

    def rotation_due(self, blob_bytes: int) -> bool:
        """The next batch of ``blob_bytes`` goes to a new segment."""
        segment = self.segments[-1]
        size = segment.size_bytes + self._pending_bytes
        full = size >= self.config.segment_size_bytes or size + blob_bytes > U32_MAX
        return bool(segment.count or self._pending_count) and full

    def _segment_for(self, blob_bytes: int) -> Segment:
        """The open segment, after rolling to a new one if it is full. Raises IggyError."""
        segment = self.segments[-1]
        if self.rotation_due(blob_bytes):
            assert not self._pending_count, "segment rotation with batches in flight"
            if self.config.enforce_fsync and not segment.seal_synced:
                self._seal_durably(segment)
            try:
                self._add_segment(Segment(self.path, self.next_offset, self.files))
                self._directory_unsynced = True
            except OSError as e:
                self._refuse_if_deleted(e)
                self._report_rotation_failure(e)
                code = (ErrorCode.CANNOT_WRITE_TO_FILE if is_no_space(e)
                        else ErrorCode.CANNOT_CREATE_SEGMENT_LOG_FILE)
                raise IggyError(code, str(e)) from e
            self._rotation_failure = None
            log.info("segment rotation in %s: sealed at %d bytes, new segment from offset %d",
                     self.path, segment.size_bytes, self.next_offset)
            segment = self.segments[-1]
        return segment

    def _report_rotation_failure(self, error: OSError) -> None:
        """Log a roll-over refused because the new segment's files cannot be created: the
        partition, the file and the OS error, once while the same failure repeats (every
        send that needs the roll-over meets it again); again after a roll-over succeeded."""
        path = error.filename or os.path.join(self.path, segment_file_name(self.next_offset,
                                                                           LOG_SUFFIX))
        failure = f"{path}: {error.strerror or error}"
        if failure == self._rotation_failure:
            return
        self._rotation_failure = failure
        log.error("partition %d (%s): cannot roll over to a new segment at offset %d: "
                  "cannot create %s: %s; sends are refused until it can be", self.partition_id,
                  self.path, self.next_offset, path, error.strerror or error)

    def _seal_durably(self, segment: Segment) -> None:
        """With ``enforce_fsync`` a segment is on the device before the next one exists:
        recovery trusts every whole record of a sealed segment, which after a power loss
        would otherwise keep part of a batch not yet fsynced. The send path has it done off
        the event loop first (``seal_async``); this is the synchronous ``append``'s way.
        Raises IggyError (and fails the storage) when the fsync fails."""
        try:
            segment.fsync()
        except OSError as exc:
            self.fail_storage(exc)
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, str(exc)) from exc

    def seal_due(self, blob_bytes: int) -> bool:
        """With ``enforce_fsync``: the next batch of ``blob_bytes`` rolls the open segment
        over, which is not yet fsynced as it is (``seal_async`` first)."""
        return (self.config.enforce_fsync and self.rotation_due(blob_bytes)
                and not self.segments[-1].seal_synced)

    def seal_async(self, done: Callable[[], None]) -> None:
        """fsync the open segment's files on the process's fsync thread (``FSYNC_THREAD``,
        behind any group-commit round queued before: never beside one), the event loop not
        waiting; then, on the loop, mark it ``seal_synced`` (or, when the fsync failed, fail
        the storage as ``_seal_durably`` does) and call ``done()``; a partition closed or
        purged meanwhile is left as it is. The held handles keep the descriptors open
        meanwhile. Only with nothing in flight (the caller holds further batches until
        ``done``)."""
        segment, epoch, size = self.segments[-1], self.epoch, self.segments[-1].size_bytes
        io = self.io

        def job() -> None:
            for handle in handles:
                io.fsync_in_worker(handle.fd)

        def finished(error: OSError | None) -> None:
            if not self.closed and epoch == self.epoch and segment is self.segments[-1]:
                if error is not None:
                    self.fail_storage(error)
                elif segment.size_bytes == size:
                    segment.synced()
            done()

        try:
            handles = segment.handles()
        except OSError as exc:  # no descriptor to fsync through: as a failed fsync
            finished(exc)
            return
        FSYNC_THREAD.run(job, finished)

    def flush(self, fsync: bool = False) -> None:
        """Nothing is buffered in Python; with ``fsync`` every written segment is fsynced.
        Raises OSError; with ``enforce_fsync`` a failed fsync also fails the partition's
        storage (``fail_storage``, see the module docstring)."""
        if not fsync:
            return
        for segment in self._maybe_unsynced():
            if not segment.dirty:
                continue
            try:
                segment.fsync()
            except OSError as exc:
                if self.config.enforce_fsync:
                    self.fail_storage(exc)
                raise

    def flush_async(self) -> asyncio.Future | None:
        """``flush(fsync=True)`` with the event loop not waiting (a client's
        FlushUnsavedBuffer): the segments written since their last fsync are taken here
        (``_take_dirty``) and fsynced on ``FSYNC_THREAD`` (behind the rounds and seals queued
        before: never two fsyncs of one file at once); the future resolves once they are,
        None when nothing is unsynced. When an fsync fails those segments are marked written
        again (a later flush tries them again), with ``enforce_fsync`` the storage fails
        (``fail_storage``, on the loop before any later round is answered), and the future
        fails with the OSError. Raises OSError when a file cannot be opened to fsync it."""
        dirty, handles = self._take_dirty()
        if not handles:
            return None
        future = asyncio.get_running_loop().create_future()
        io, epoch = self.io, self.epoch

        def job() -> None:
            for handle in handles:
                io.fsync_in_worker(handle.fd)

        def finished(error: OSError | None) -> None:
            if error is None:
                future.set_result(None)
                return
            if epoch == self.epoch:  # else purged meanwhile: those segments are gone
                self._mark_unsynced(dirty)
                if self.config.enforce_fsync:
                    self.fail_storage(error)
            future.set_exception(error)

        FSYNC_THREAD.run(job, finished)
        return future

    def synced_to(self, next_offset: int, epoch: int) -> None:
        """Everything before ``next_offset`` is on the device (a group-commit fsync of the
        files written up to then succeeded); ignored when the round began before a purge
        (``epoch`` is the one it began in)."""
        if epoch == self.epoch:
            self.synced_next_offset = max(self.synced_next_offset, next_offset)

    def fail_storage(self, error: OSError) -> None:
        """An fsync failed: cut back to the last synced offset and refuse further appends
        (see the module docstring). A failed cut is logged; recovery decides at reopen. Only
        the first failure counts: once failed, the partition stays as it is until reopened."""
        if self.storage_failure is not None:
            return
        self.storage_failure = str(error)
        log.error("partition %s: fsync failed (%s); cutting back to offset %d and refusing "
                  "writes until restart", self.path, error, self.synced_next_offset)
        if self.pipeline.idle:  # else once the writes in flight drained (``settle``)
            self._cut_to_synced()

    def _cut_to_synced(self) -> None:
        try:
            self.truncate_to(self.synced_next_offset)
        except OSError as exc:
            log.error("partition %s: cannot cut back after a failed fsync: %s", self.path, exc)

    def _abandon_inflight(self, refuse_with: ErrorCode | None) -> None:
        self.pipeline.abandon(refuse_with)
        self._pending_count = self._pending_bytes = 0

    def truncate_to(self, next_offset: int) -> None:
        """Drop every message at or after ``next_offset`` (whole later segments are
        deleted, the first segment is kept; an offset before it empties it). Raises
        OSError when a segment's log file cannot be removed or cut: the partition then
        ends where the files left on disk end, counters included."""
        next_offset = max(next_offset, self.segments[0].start_offset)
        try:
            while len(self.segments) > 1 and self.segments[-1].start_offset >= next_offset:
                _delete_files(self.segments[-1])
                self.segments.pop()
            self.segments[-1].sealed = False
            self.segments[-1].truncate_to(next_offset - self.segments[-1].start_offset)
        finally:
            self._recount()

    def _recount(self) -> None:
        """The next offset, counters and last timestamp from the segments held."""
        self.next_offset = self.segments[-1].next_offset
        self._unsynced_from = min(self._unsynced_from, self.segments[-1].start_offset)
        self.messages_count = sum(segment.count for segment in self.segments)
        self.size_bytes = sum(segment.size_bytes for segment in self.segments)
        self._restamp_last()
        self.cache_window.follow()

    def take_unsynced(self) -> list[FileHandle]:
        """Handles of the files written since the last call (log and index of each such
        segment), marked clean: the caller fsyncs their ``fd`` (group commit); holding the
        handles keeps the descriptors open meanwhile. Raises OSError."""
        return self._take_dirty()[1]

    def _take_dirty(self) -> tuple[list[Segment], list[FileHandle]]:
        """The segments written since their last fsync and their files' handles (log and
        index of each), the segments marked clean; only the segments from ``_unsynced_from``
        on are looked at (module docstring). Raises OSError (then none is marked)."""
        dirty = [segment for segment in self._maybe_unsynced() if segment.dirty]
        handles = [handle for segment in dirty for handle in segment.handles()]
        for segment in dirty:  # only once every handle was had: a failure leaves them dirty
            segment.dirty = False
        self._unsynced_from = self.segments[-1].start_offset
        return dirty, handles

    def _maybe_unsynced(self) -> Iterator[Segment]:
        """The segments that may be dirty: from the one holding ``_unsynced_from`` on."""
        return self.segments_from(self._unsynced_from)

    def _mark_unsynced(self, segments: list[Segment]) -> None:
        """``segments`` (oldest first) are not on the device after all (a failed fsync): a
        later flush or round takes them again."""
        for segment in segments:
            segment.dirty = True
        if segments:
            self._unsynced_from = min(self._unsynced_from, segments[0].start_offset)

    def take_unsynced_directory(self) -> str | None:
        """The partition directory when a segment was created in it since the last call
        (the caller fsyncs it with the files: group commit), else None."""
        if not self._directory_unsynced:
            return None
        self._directory_unsynced = False
        return self.path

    # -- reading -------------------------------------------------------------------------

    def read_offset(self, start: int, count: int) -> PolledSlice:
        """Up to ``count`` messages from offset ``start`` (from the first stored one when
        ``start`` is older); empty when ``start`` is past the last offset or count is 0."""
        if count <= 0 or self.messages_count == 0 or start >= self.next_offset:
            return EMPTY
        first = self._stored_from(max(start, self.first_offset))
        if first is None:
            return EMPTY
        return self._slice(first, min(first + count, self.next_offset) - 1)

    def _stored_from(self, offset: int) -> int | None:
        """The first stored offset at or after ``offset`` (offsets a sealed segment lost at
        a crash are skipped, so a consumer does not stall there), or None."""
        for segment in self.segments_from(offset):
            if segment.count and segment.end_offset >= offset:
                return max(offset, segment.start_offset)
        return None

    def segments_from(self, offset: int) -> Iterator[Segment]:
        """The segments from the one ``offset`` falls in (the first one when it is older),
        oldest first; found by bisecting the start offsets, not by walking or copying the
        segment list (a poll costs the same with 20,000 segments as with 2)."""
        segments = self.segments
        first = max(bisect.bisect_right(segments, offset, key=_START_OFFSET) - 1, 0)
        return (segments[i] for i in range(first, len(segments)))  # islice would skip one by one

    def read_timestamp(self, timestamp_us: int, count: int) -> PolledSlice:
        """Up to ``count`` messages from the first one with timestamp >= ``timestamp_us``."""
        if count <= 0:
            return EMPTY
        segment = self._first_segment_since(timestamp_us)
        if segment is None:
            return EMPTY
        i = int(np.searchsorted(segment.index.timestamps, timestamp_us, side="left"))
        return self.read_offset(segment.start_offset + i, count)

    def _first_segment_since(self, timestamp_us: int) -> Segment | None:
        """The first segment holding a message with timestamp >= ``timestamp_us``, or None.

        Found by bisecting the segments' last timestamps, which increase from segment to
        segment (module docstring). An empty segment (the open one just rolled over, a
        sealed one a crash emptied) holds no timestamp and bisects as the newest: a bisection
        can stop on one before the answer, never past it (whatever it stops after holds
        only older messages), so the empty ones are stepped over and, when the segment
        reached is still too old, the search goes on after it."""
        segments, lo = self.segments, 0
        while True:
            i = bisect.bisect_left(segments, timestamp_us, lo=lo, key=_newest_timestamp)
            while i < len(segments) and not segments[i].count:
                i += 1
            if i == len(segments):
                return None
            if segments[i].last_timestamp >= timestamp_us:
                return segments[i]
            lo = i + 1

    def read_first(self, count: int) -> PolledSlice:
        return self.read_offset(self.first_offset, count)

    def read_last(self, count: int) -> PolledSlice:
        """The last ``count`` messages."""
        if count <= 0:
            return EMPTY
        return self.read_offset(self.next_offset - min(count, self.next_offset), count)

    def read_next(self, kind: OffsetKind, key: int, count: int) -> PolledSlice:
        """From the stored offset + 1 of (kind, key), or the first offset when none."""
        stored = self.offsets.get(kind, key)
        return self.read_offset(self.first_offset if stored is None else stored + 1, count)

    def poll(self, strategy: PollKind | int, value: int, count: int,
             consumer: tuple[OffsetKind, int] = ("consumers", 0)) -> PolledSlice:
        """Dispatch a wire polling strategy (§4.6). Raises ValueError for an unknown kind."""
        read = _STRATEGIES.get(strategy)  # an IntEnum kind and its int find the same entry
        if read is None:
            raise ValueError(f"{strategy!r} is not a valid {PollKind.__name__}")
        return read(self, value, count, consumer)

    def _slice(self, first: int, last: int) -> PolledSlice:
        """Byte ranges of offsets first..last (both stored), one range per segment."""
        ranges: list[ByteRange] = []
        got_first, got_last, n, history = -1, -1, 0, False
        for segment in self.segments_from(first):
            if segment.start_offset > last:
                break
            a, b = max(first, segment.start_offset), min(last, segment.end_offset)
            if a > b:
                continue
            position, length = segment.byte_range(a - segment.start_offset,
                                                  b - segment.start_offset)
            history = self.cache_window.read(segment, position) or history
            log = self._log_file(segment)
            ranges.append(ByteRange(segment.log_path, log.fd, position, length, log))
            got_first = a if got_first < 0 else got_first
            got_last, n = b, n + b - a + 1
        if not n:
            return EMPTY
        return PolledSlice(got_first, n, got_last, tuple(ranges), history)

    def _log_file(self, segment: Segment) -> FileHandle:
        """``segment``'s log handle for a poll. Raises OSError, IggyError PARTITION_NOT_FOUND
        (``_refuse_if_deleted``)."""
        try:
            return segment.log_file()
        except OSError as exc:
            self._refuse_if_deleted(exc)
            raise

    def _refuse_if_deleted(self, error: OSError) -> None:
        """Raise IggyError PARTITION_NOT_FOUND when ``error`` is a file missing because this
        partition's directory is gone: with several shards the metadata owner moves a
        deleted partition's directory aside (``tombstones``) before the owning shard applies
        the deletion and closes it, and a command served meanwhile finds no files there."""
        if isinstance(error, FileNotFoundError) and not os.path.isdir(self.path):
            raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                            f"partition {self.partition_id} is being deleted") from error

    # -- consumer offsets ----------------------------------------------------------------

    def store_offset(self, kind: OffsetKind, key: int, offset: int) -> asyncio.Future | None:
        """Persist a consumer's (``consumers``) or group's (``groups``) offset: None once
        stored, or with ``enforce_fsync`` a future (``ConsumerOffsets``). Raises OSError,
        IggyError PARTITION_NOT_FOUND (``_refuse_if_deleted``)."""
        return self._offsets_call(lambda: self.offsets.store(kind, key, offset))

    def get_offset(self, kind: OffsetKind, key: int) -> int | None:
        return self.offsets.get(kind, key)

    def stored_offsets(self, kind: OffsetKind) -> dict[int, int]:
        """Consumer (or group) id -> stored offset, as the last calls left them."""
        return self.offsets.items(kind)

    def delete_offset(self, kind: OffsetKind, key: int) -> asyncio.Future | None:
        """None once deleted, or with ``enforce_fsync`` a future. Raises IggyError
        CONSUMER_OFFSET_NOT_FOUND when nothing is stored, PARTITION_NOT_FOUND
        (``_refuse_if_deleted``), OSError."""
        return self._offsets_call(lambda: self.offsets.delete(kind, key))

    def _offsets_call(self, call: Callable[[], asyncio.Future | None]) -> asyncio.Future | None:
        """``call()``, a store or delete of ``ConsumerOffsets``, whose failure to open a file
        (OSError, or the IggyError it became) is PARTITION_NOT_FOUND while this partition's
        directory is gone for its deletion (``_refuse_if_deleted``)."""
        try:
            return call()
        except IggyError as exc:
            if isinstance(exc.__cause__, OSError):
                self._refuse_if_deleted(exc.__cause__)
            raise
        except OSError as exc:
            self._refuse_if_deleted(exc)
            raise

    def forget_offset(self, kind: OffsetKind, key: int) -> None:
        """Delete the stored offset if there is one (a deleted group's), without waiting
        for the device; a failure is logged (the offset then stays)."""
        if self.offsets.get(kind, key) is None:
            return
        try:
            pending = self.offsets.delete(kind, key)
        except IggyError as exc:  # its file cannot be removed now (``ConsumerOffsets``)
            log.error("cannot delete the stored offset of %s %d: %s", kind, key, exc)
            return
        if pending is not None:
            pending.add_done_callback(lambda done: _log_failed_change(done, "delete", kind, key))

    # -- maintenance ---------------------------------------------------------------------

    def min_stored_offset(self) -> int | None:
        """The lowest offset stored by any consumer or group here (None when none is)."""
        return self.offsets.lowest()

    def deletable_segments(self, barrier: int | None = None) -> int:
        """How many leading segments may go: sealed ones (never the open one) whose last
        offset is at most ``barrier`` (None = no barrier; the 0.8 server passes the lowest
        stored consumer offset, so unconsumed messages are kept)."""
        sealed = len(self.segments) - 1
        if barrier is None or sealed <= 0:
            return max(sealed, 0)
        return bisect.bisect_right(self.segments, barrier, hi=sealed, key=_END_OFFSET)

    def expired_segments(self, now_us: int, expiry_us: int, barrier: int | None = None) -> int:
        """How many leading segments hold only messages older than ``expiry_us`` at
        ``now_us`` and may be deleted (see ``deletable_segments``). A sealed segment that
        holds none (a crash emptied it) has nothing to keep: it goes with the expired ones
        around it, and does not stop expiry at it for good."""
        deletable, segments = self.deletable_segments(barrier), self.segments
        for n in range(deletable):  # not a slice: it stops at the first one kept
            if segments[n].count and not segments[n].is_expired(now_us, expiry_us):
                return n
        return deletable

    def first_kept_after(self, n: int, barrier: int | None = None) -> int:
        """The first offset stored once the oldest ``n`` deletable segments (see
        ``deletable_segments``) are deleted: ``first_offset`` when none may go."""
        return self.segments[max(0, min(n, self.deletable_segments(barrier)))].start_offset

    def delete_segments_below(self, offset: int) -> tuple[int, int]:
        """Delete the sealed segments whose messages are all below ``offset`` (never the
        open one). Returns (segments, messages) deleted. Raises OSError, as
        ``delete_oldest_segments``."""
        return self.delete_oldest_segments(len(self.segments), offset - 1)

    def skip_to(self, offset: int) -> None:
        """Start the log at ``offset``, past its end: the next message appended gets it,
        and every message below it goes (a cluster replica whose peers deleted what it
        lacks). A new segment starts there and the older ones are deleted; a crash or a
        file that refuses between the two leaves them, below a gap that reads skip.
        Raises OSError; RuntimeError with batches in flight."""
        if offset <= self.next_offset:
            return
        if self._pending_count:
            raise RuntimeError(f"partition {self.path}: batches in flight")
        self._add_segment(Segment(self.path, offset, self.files))
        self._directory_unsynced = True
        self.synced_next_offset = offset
        self.delete_segments_below(offset)

    def delete_expired_segments(self, now_us: int, expiry_us: int,
                                barrier: int | None = None) -> tuple[int, int]:
        """Delete the sealed segments whose messages are all expired. Returns (segments,
        messages) deleted. Raises OSError."""
        return self.delete_oldest_segments(self.expired_segments(now_us, expiry_us, barrier))

    def delete_oldest_segments(self, n: int, barrier: int | None = None) -> tuple[int, int]:
        """``set_oldest_segments_aside`` without waiting for the files' removal (retention:
        nobody is answered). Returns (segments deleted, messages deleted). Raises OSError."""
        segments, messages, _removal = self.set_oldest_segments_aside(n, barrier)
        return segments, messages

    def set_oldest_segments_aside(self, n: int, barrier: int | None = None
                                  ) -> tuple[int, int, asyncio.Future | None]:
        """Delete up to ``n`` oldest sealed segments (never the open one; none past
        ``barrier``, see ``deletable_segments``). Offsets are kept: the next append still
        gets ``next_offset`` and polls of deleted offsets start at the first one left.

        All or nothing, as a purge: each file (log first, so an index alone is an orphan
        the next open removes) is renamed aside (``_set_aside``: a name no open reads as a
        segment, removed at any open), then the segments leave the partition; one rename
        that fails renames the others back and raises OSError: every segment stays, in
        memory as on disk. Set aside, the files are removed on the backend's worker thread
        (``_remove_in_worker``: an unlink of a synced file can take milliseconds), and one
        that cannot be is logged and removed at the next start. A crash at any point leaves
        a prefix of them deleted, never a segment half there. With ``enforce_fsync`` the
        directory is fsynced after the renames, on the worker thread before the removals
        when an event loop runs (``_sync_removals``).

        Returns (segments deleted, messages deleted, a future that resolves once the files
        are removed (answer a client then), or None when there is nothing to wait for)."""
        doomed = self.segments[:max(0, min(n, self.deletable_segments(barrier)))]
        if not doomed:
            return 0, 0, None
        set_aside = _set_aside([path for segment in doomed
                                for path in (segment.log_path, segment.index_path)], self.io)
        for segment in doomed:
            segment.close()
        messages = self._forget_oldest(doomed)
        if self.config.enforce_fsync:
            self._sync_removals()  # queued before the removals: the worker runs jobs in order
        return len(doomed), messages, self._remove_in_worker(set_aside)

    def _sync_removals(self) -> asyncio.Future | None:
        """fsync the directory after segment files are set aside: on the worker thread when
        an event loop runs (a future that resolves after it), else here (None). A failure is
        logged, not raised: the segments are gone here, a caller asked again would delete
        more, and segments a power loss brings back are only deleted again by retention."""
        return _off_loop(self.io, lambda: _sync_after_removals(self.path, self.io))

    def _forget_oldest(self, gone: list[Segment]) -> int:
        """Drop the oldest segments ``gone`` (their files set aside) from the segments and
        counters; their message count."""
        self.segments = self.segments[len(gone):]
        messages = sum(segment.count for segment in gone)
        self.messages_count -= messages
        self.size_bytes -= sum(segment.size_bytes for segment in gone)
        if gone:
            self.cache_window.follow()
            log.info("deleted %d segment(s) (%d message(s), offsets below %d) in %s",
                     len(gone), messages, self.first_offset, self.path)
        return messages

    def purge(self) -> asyncio.Future | None:
        """Drop every segment and stored offset; restart empty at offset 0 (as 0.8 does),
        all of it here and now (the cluster's replicated purge, tools; the server's own
        purges use ``purge_async``, whose disk work runs off the event loop).
        Batches in flight or still waiting for their turn are answered, and gone with the
        rest: they came before the purge (not refused: 0.8 runs a purge between two sends).
        When the new segment's files cannot be created now (full disk, no descriptor) they
        are created by the first send (``Segment`` with ``create=False``); until then polls
        find nothing and a send fails with CANNOT_WRITE_TO_FILE.

        All or nothing for the messages: every segment file is first renamed aside
        (``_set_aside``), so a file that cannot be renamed leaves every segment in place, in
        memory as on disk; set aside, they are removed off the event loop, and one that
        cannot be is removed at the next start. The stored offsets go first, each file
        before its value in memory. Across a crash: ``PURGE_MARKER`` is there from before the
        first change until every file is set aside (a file set aside is removed at any open;
        ``_finish_interrupted_purge``); then it is set aside too. Raises IggyError
        CANNOT_DELETE_FILE (10008, as 0.8) when a file cannot be removed or set aside, or
        the marker cannot be made. Returns a future that resolves once the files set aside
        are removed (answer the purge then; ``_remove_in_worker``), or None without an
        event loop.

        With ``enforce_fsync`` an answered purge is durable: the marker is fsynced (file and
        directory) before the first change, the directories after the last. When that last
        fsync or the marker's rename fails, the purge is done all the same (the marker,
        left, has the next start finish it) and the partition refuses sends until a restart
        (``storage_failure``): that start would remove them with the rest."""
        durable = self.config.enforce_fsync
        try:
            marker: str | None = _mark_purge(self.path, self.io, durable)
        except OSError as exc:
            if not self._without_marker(exc):
                _drop_marker_of_failed_purge(os.path.join(self.path, PURGE_MARKER), self.path,
                                             self.io, durable)
                raise _not_purged(self.path, exc) from exc
            marker = None
        try:
            self.offsets.clear()
            set_aside = self._set_segments_aside()
        except OSError as exc:
            _drop_marker_of_failed_purge(marker, self.path, self.io, durable)
            raise _not_purged(self.path, exc) from exc
        try:
            set_aside += _finish_on_disk(marker, self.path, self.io, durable)
        except OSError as exc:
            self._not_finished_on_disk(exc)
        self._restart_empty()
        return self._remove_in_worker(set_aside)

    async def purge_async(self, emptied: Callable[[], None] = lambda: None) -> None:
        """``purge`` (the server's) with none of its directory fsyncs and marker work on the
        event loop, in the same order: the marker is made (and with ``enforce_fsync``
        fsynced, file and directory) on the backend's worker thread; then here the stored
        offsets are removed and the segment files set aside (renames), the partition starts
        empty and ``emptied()`` is called; then, once the stored offsets' changes queued
        before are done (``ConsumerOffsets.clear``), the directories are fsynced and the
        marker set aside on the worker thread, and the files set aside are removed there.
        Returns after all of it (answer the purge then); raises as ``purge``, or
        PARTITION_NOT_FOUND when the partition was deleted meanwhile. Purges of one
        partition run one after the other (``_purge_turn``). Sends that come while the disk
        work after the renames is under way wait for it (``_held_by_purge``): when it fails
        they are refused, as after ``purge``."""
        async with self._purge_turn:
            durable = self.config.enforce_fsync
            marker = await self._mark_off_loop(durable)
            try:
                if self.closed:  # deleted, or the server stops
                    raise FileNotFoundError(errno.ENOENT, "the partition was closed meanwhile")
                offsets_done = self.offsets.clear()
                set_aside = self._set_segments_aside()
            except OSError as exc:
                await _in_worker(self.io, lambda: _drop_marker_of_failed_purge(
                    marker, self.path, self.io, durable))
                self._refuse_if_deleted(exc)
                raise _not_purged(self.path, exc) from exc
            self._restart_empty()
            try:
                emptied()  # at once, as after ``purge``: nothing comes between
            finally:
                set_aside += await self._finish_off_loop(marker, durable, offsets_done)
            await _in_worker(self.io, lambda: _remove_set_aside(set_aside, self.io))

    async def _mark_off_loop(self, durable: bool) -> str | None:
        """``_mark_purge`` on the worker thread (see ``_without_marker``). Raises IggyError
        CANNOT_DELETE_FILE after removing the marker again (nothing has changed), or
        PARTITION_NOT_FOUND when the partition's directory is gone (``_refuse_if_deleted``:
        deleted meanwhile)."""
        try:
            return await _in_worker(self.io, lambda: _mark_purge(self.path, self.io, durable))
        except OSError as exc:
            if self._without_marker(exc):
                return None
            await _in_worker(self.io, lambda: _drop_marker_of_failed_purge(
                os.path.join(self.path, PURGE_MARKER), self.path, self.io, durable))
            self._refuse_if_deleted(exc)
            raise _not_purged(self.path, exc) from exc

    async def _finish_off_loop(self, marker: str | None, durable: bool,
                               offsets_done: asyncio.Future | None) -> list[str]:
        """After the stored offsets' queued changes (``offsets_done``: the removal of the
        files they leave), ``_finish_on_disk`` on the worker thread, sends held meanwhile
        (``_held_by_purge``); the marker's new name to remove; none when either failed
        (``_not_finished_on_disk``: the marker stays, and the next start removes what is
        left)."""
        finishing = self._finishing = asyncio.get_running_loop().create_future()
        try:
            failed = None if offsets_done is None else await offsets_done
            if failed is not None:
                raise failed
            return await _in_worker(self.io, lambda: _finish_on_disk(marker, self.path,
                                                                     self.io, durable))
        except OSError as exc:
            self._not_finished_on_disk(exc)
            return []
        finally:
            self._finishing = None
            finishing.set_result(None)

    def _without_marker(self, error: OSError) -> bool:
        """The marker could not be made (``error``): whether to go on without one, as when
        the disk has no room for it (logged: a purge is how room is made, and a crash during
        it may leave it half done). Otherwise the caller removes the marker again and
        refuses the purge (nothing has changed)."""
        if is_no_space(error) and not os.path.exists(os.path.join(self.path, PURGE_MARKER)):
            log.warning("partition %s: no room for the purge marker (%s); purged without it "
                        "(a crash during this purge may leave it half done)", self.path, error)
            return True
        return False

    def _set_segments_aside(self) -> list[str]:
        """``_set_aside`` of every segment's log and index file. Raises OSError (nothing
        set aside then)."""
        return _set_aside([path for segment in self.segments
                           for path in (segment.log_path, segment.index_path)], self.io)

    def _not_finished_on_disk(self, error: OSError) -> None:
        """``_finish_on_disk`` failed: the partition takes no sends until a restart, which
        finishes the purge (see ``purge``)."""
        self.storage_failure = f"purge not finished on disk: {error}"
        log.error("partition %s: purged, but its purge cannot be finished on disk (%s); "
                  "refusing writes until restart, which finishes it", self.path, error)

    def _restart_empty(self) -> None:
        """The purge's change in memory, once every file is set aside: the batches in
        flight answered, the old segments closed, a new empty one (``_start_empty``)."""
        self._abandon_inflight(refuse_with=None)
        for segment in self.segments:
            segment.close()
        self._start_empty()

    def _held_by_purge(self, batch: MessageBatch) -> asyncio.Future:
        """``append_async`` of a batch sent while a purge finishes on disk
        (``_finish_off_loop``), once it has: a future as ``append_async``'s (refused then
        when the purge failed there, or the partition was closed meanwhile)."""
        assert self._finishing is not None
        held = asyncio.get_running_loop().create_future()

        def append(_finished: asyncio.Future) -> None:
            if held.done():  # the sender is gone
                return
            try:
                if self.closed:
                    raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                                    f"partition {self.partition_id} is closed")
                written = self.append_async(batch)
            except Exception as exc:  # any: the sender waits for this future
                held.set_exception(exc)
                return
            if written is None:
                held.set_result(None)
            else:
                written.add_done_callback(lambda done: _pass_outcome(done, held))

        self._finishing.add_done_callback(append)
        return held

    def _remove_in_worker(self, set_aside: list[str]) -> asyncio.Future | None:
        """Remove the files set aside on the backend's worker thread (``run_in_worker``:
        freeing a big file's blocks can take tens of milliseconds); a future that resolves
        after it. Without an event loop (tools, start-up) they are removed here and now, and
        None is returned. A file that cannot be removed is logged (``_remove_set_aside``)."""
        return _off_loop(self.io, lambda: _remove_set_aside(set_aside, self.io))

    def _start_empty(self) -> None:
        """Counters and timestamps of an empty partition, a new ``epoch``, a new segment at
        offset 0 (see ``purge``)."""
        self.segments = []
        self.next_offset = self.messages_count = self.size_bytes = 0
        self._last_timestamp = 0
        self.epoch += 1
        self.synced_next_offset = self._unsynced_from = 0
        try:
            fresh = Segment(self.path, 0, self.files)
        except OSError as exc:
            log.error("partition %s: purged, but its new segment cannot be created yet (%s); "
                      "the next send creates it", self.path, exc)
            fresh = Segment(self.path, 0, self.files, create=False)
        self._add_segment(fresh)
        self.cache_window.follow()
        self._directory_unsynced = True

    def close(self, deleted: bool = False) -> None:
        """Close every segment's files (fsync first when ``enforce_fsync``); with nothing in
        flight, the open segment's reserved blocks go back first (a write still in flight
        could land past the cut). Sends still waiting are refused: PARTITION_NOT_FOUND when
        the partition is ``deleted``, else CANNOT_WRITE_TO_FILE (the server stops)."""
        idle = self.pipeline.idle
        self.closed = True
        self._abandon_inflight(ErrorCode.PARTITION_NOT_FOUND if deleted
                               else ErrorCode.CANNOT_WRITE_TO_FILE)
        try:
            self.flush(self.config.enforce_fsync)
        except OSError as exc:  # recorded by ``flush``; the files are closed all the same
            log.error("partition %s: fsync at close failed: %s", self.path, exc)
        if idle and self.segments:
            self.segments[-1].release_reservation()
        for segment in self.segments:
            segment.close()


def _not_purged(path: str, exc: OSError) -> IggyError:
    log.error("partition %s not purged: %s", path, exc)
    return IggyError(ErrorCode.CANNOT_DELETE_FILE, f"not purged: {exc}")


def purge_each(partitions: Iterable[Partition],
               then: Callable[[Partition], None] = lambda _partition: None
               ) -> Awaitable[None]:
    """Purge every partition (``Partition.purge_async``, started now and finished even if
    nobody awaits the result), also after one that could not be purged (each is purged
    whole or not at all), calling ``then`` with each one once it is emptied. Returns what to
    await before answering, which raises the first failure's IggyError once every purge is
    done."""
    purges = [asyncio.ensure_future(partition.purge_async(lambda p=partition: then(p)))
              for partition in partitions]
    return _first_failure(asyncio.gather(*purges, return_exceptions=True))


async def _first_failure(outcomes: asyncio.Future) -> None:
    """Await ``outcomes`` (shielded: a purge is never cancelled half-way); raise the first
    exception among them."""
    for outcome in await asyncio.shield(outcomes):
        if isinstance(outcome, BaseException):
            raise outcome


_STRATEGIES = {
    PollKind.OFFSET: lambda p, value, count, _: p.read_offset(value, count),
    PollKind.TIMESTAMP: lambda p, value, count, _: p.read_timestamp(value, count),
    PollKind.FIRST: lambda p, _value, count, _: p.read_first(count),
    PollKind.LAST: lambda p, _value, count, _: p.read_last(count),
    PollKind.NEXT: lambda p, _value, count, who: p.read_next(who[0], who[1], count),
}


def _newest_timestamp(segment: Segment) -> float:
    """What a segment bisects by in ``Partition._first_segment_since``: its last message's
    timestamp, infinity when it has none."""
    return segment.last_timestamp if segment.count else math.inf


def _log_failed_change(done: asyncio.Future, change: str, kind: str, key: int) -> None:
    error = None if done.cancelled() else done.exception()
    if error is not None:
        log.error("cannot %s the stored offset of %s %d: %s", change, kind, key, error)
