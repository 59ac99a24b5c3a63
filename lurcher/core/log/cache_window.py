"""Drop-behind: a partition keeps only its newest log bytes in the page cache
(``system.segment.page_cache_window``).

Why. A log is written once, at its end, and read mostly near its end. Left to itself the
kernel keeps every written page cached until memory runs short, so each new batch is copied
into pages it has not used for a long time. On this project's machine (a VM) that copy ran
at about 400 MB/s once a partition had grown past a gigabyte, against over 2 GB/s into pages
freed a moment before: a sustained producer fell from 650-770k to about 300k msg/s
(README, Performance). Handing the old ranges back keeps the pages the next batches get warm.

What ``CacheWindow`` does, per partition:
- At open its cursor is ``window`` bytes before the end of the newest segment (or at its
  start): older bytes are history, left where they are until a poll reads them.
- After a commit, once the managed bytes exceed ``window`` by a ``step`` (32 MiB, at most half
  the window) or more, the oldest
  of them, all but the newest ``window``, are planned as ranges (one per segment) and handed
  to one background thread (``Evictor``), which writes each range back
  (``sync_file_range``: wait, write, wait) and then evicts it (``POSIX_FADV_DONTNEED``, from
  ``FOLIO_ALIGN`` before the range: a large folio across the previous range's end). The
  cursor moves past them at once. At most one job per partition is in flight; when it is
  done the event loop checks again, so a producer that stopped leaves at most its window.
- A poll that reads below the cursor (history, already evicted) evicts what its reader left
  behind, a quarter step back, in quarter steps, so a reader of history reuses the same pages
  too (read-behind). At most ``MAX_READ_JOBS`` such jobs wait for the thread, process-wide;
  past that a reader's range is not handed over and its mark stays, so its next poll hands
  over all of it (a stalled thread costs memory for at most that many small jobs).

Invariants: nothing younger than ``window`` bytes, and nothing not yet committed, is ever
planned; the event loop never waits (the loop only plans; the thread does the system calls);
the thread opens each file itself, so a writeback error it meets does not consume the error
report an ``fsync`` of the server's own descriptor gets (errseq is per open file), and it is
logged, once per file: at most ``MAX_FAILED_PATHS`` files are remembered as logged (past
that the ones no longer there are forgotten first, then the oldest), so a long life of
segments deleted does not grow what is remembered. Eviction is advice: what it touches stays
correct, only its place (memory or device) changes. Segments deleted or cut meanwhile are
skipped (ENOENT; a range past the end is a no-op). The cursor is always on a live segment:
when the partition drops segments (retention, DeleteSegments, a purge, a cut after a failed
fsync) it ``follow``s, moving off a dropped one at once. ``window = 0`` turns all of this
off.
"""

from __future__ import annotations

import asyncio
import bisect
import ctypes
import logging
import operator
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from lurcher.core.log.io import SYNC_FILE_RANGE

log = logging.getLogger(__name__)

STEP = 32 * 1024 * 1024
# Eviction starts this far back from a range's first byte: the page cache holds large folios
# (up to 2 MiB, naturally aligned) and POSIX_FADV_DONTNEED drops only folios wholly inside
# its range, so a folio across the previous range's end would otherwise stay cached for good
# (measured: 86 of 2,096 pages of a 10 MB log written in 68 KB batches). Evicting what is
# already gone again costs nothing.
FOLIO_ALIGN = 2 * 1024 * 1024
MAX_READ_JOBS = 64
MAX_FAILED_PATHS = 1024  # files whose failure was logged and is remembered (``Evictor``)
_WAIT_WRITE_WAIT = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER

Range = tuple[str, int, int]
"""(log file path, first byte, byte count)."""


class CacheWindow:
    """The drop-behind cursor of one partition (see the module docstring)."""

    __slots__ = ("window", "step", "read_step", "evictor", "_segments_of", "_segment",
                 "_position", "_since_check", "_job", "_read_marks")

    def __init__(self, window: int, segments_of: Callable[[], Sequence[Any]],
                 evictor: Evictor | None = None) -> None:
        """``segments_of()``: the partition's segments, oldest first, as they are now."""
        self.window = window
        self.step = max(min(STEP, window // 2), 1)
        self.read_step = max(self.step // 4, 1)
        self.evictor = evictor or shared_evictor()
        self._segments_of = segments_of
        segments = segments_of()
        self._segment = segments[-1] if segments else None
        size = self._segment.size_bytes if self._segment is not None else 0
        self._position = max(0, size - window)
        self._since_check = 0
        self._job: threading.Event | None = None
        self._read_marks: dict[int, int] = {}

    def committed(self, nbytes: int) -> None:
        """``nbytes`` more are committed at the partition's end: maybe hand old ones back."""
        if not self.window:
            return
        self._since_check += nbytes
        if self._since_check >= self.step and not self.busy:
            self.check()

    @property
    def busy(self) -> bool:
        return self._job is not None and not self._job.is_set()

    def check(self) -> None:
        """Plan and hand over what is past the window; when that job is done (on the event
        loop that asked, if any) check again, so what was committed meanwhile goes too."""
        self._since_check = 0
        segments = self._segments_of()
        ranges = self.plan(segments) if segments else []
        if ranges:
            self._job = self.evictor.submit(ranges, writeback=True, then=self._follow_up)

    def _follow_up(self) -> None:
        if self.window and not self.busy:
            self.check()

    def plan(self, segments: Sequence[Any]) -> list[Range]:
        """The ranges older than the newest ``window`` bytes, when they are at least a step;
        the cursor moves past them."""
        at = self._cursor_index(segments)
        managed = segments[at].size_bytes - self._position
        managed += sum(s.size_bytes for s in segments[at + 1:])
        excess = managed - self.window
        if excess < self.step:
            return []
        ranges: list[Range] = []
        for segment in segments[at:]:
            take = min(excess, segment.size_bytes - self._position)
            if take > 0:
                ranges.append((segment.log_path, self._position, take))
                excess -= take
            self._segment, self._position = segment, self._position + max(take, 0)
            if excess <= 0:
                break
            self._position = 0
        return ranges

    def _cursor_index(self, segments: Sequence[Any]) -> int:
        """Where the cursor is; a cursor whose segment went (deleted, purged, cut off)
        restarts at the start of the first segment after it (the newest when none is: a
        purge's new segments start at 0 again), and one past a cut end at that end. Found by
        bisecting the start offsets (the cursor may lag the newest segment by a whole window
        of small segments, and retention has it follow after each one it deletes)."""
        start = self._segment.start_offset if self._segment is not None else -1
        i = bisect.bisect_left(segments, start, key=_START_OFFSET)
        if i < len(segments) and segments[i] is self._segment:
            self._position = min(self._position, segments[i].size_bytes)
            return i
        after = bisect.bisect_right(segments, start, key=_START_OFFSET)
        i = min(after, len(segments) - 1)
        self._segment, self._position = segments[i], 0
        return i

    def follow(self) -> None:
        """The partition dropped segments (deleted, purged, cut off): a cursor on one of them
        moves to the live ones now, not at the next plan (until then a poll of a live
        segment could be taken for history and its newest bytes evicted, and the dropped
        segment, its index included, stayed in memory); the read marks of segments gone,
        or of a new segment under a gone one's start, go."""
        segments = self._segments_of()
        if not segments:
            self._segment, self._position, self._read_marks = None, 0, {}
            return
        self._cursor_index(segments)
        self._read_marks = {start: mark for start, mark in self._read_marks.items()
                            if mark <= _live_size(segments, start)}

    def read(self, segment: Any, position: int) -> bool:
        """A poll reads ``segment`` from ``position``: below the cursor (evicted history),
        evict what its reader has left behind. Whether it reads history."""
        if not self.window or not self._behind_cursor(segment, position):
            return False
        key = segment.start_offset
        mark = self._read_marks.get(key, 0)
        end = position - self.read_step
        if end - mark >= self.read_step:
            if self.evictor.submit_read([(segment.log_path, mark, end - mark)]):
                self._read_marks[key] = end
        elif end < mark - self.read_step:  # another reader, further back: follow it from here
            self._read_marks[key] = max(end, 0)
        if len(self._read_marks) > 64:
            self._read_marks = {key: self._read_marks[key]}
        return True

    def _behind_cursor(self, segment: Any, position: int) -> bool:
        if segment is self._segment:
            return position < self._position
        cursor = self._segment
        return cursor is not None and segment.start_offset < cursor.start_offset


_START_OFFSET = operator.attrgetter("start_offset")


def _live_size(segments: Sequence[Any], start: int) -> int:
    """The size of the segment starting at ``start``, -1 when there is none (a bisection:
    ``follow`` runs at each retention deletion, and a partition may hold many segments)."""
    i = bisect.bisect_left(segments, start, key=_START_OFFSET)
    return segments[i].size_bytes if i < len(segments) and segments[i].start_offset == start \
        else -1


class Evictor:
    """One daemon thread that writes back and evicts ranges, in submission order."""

    def __init__(self, max_read_jobs: int = MAX_READ_JOBS) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._failed: dict[str, None] = {}  # logged failing files, oldest first
        self._read_slots = threading.BoundedSemaphore(max_read_jobs)

    def submit(self, ranges: list[Range], writeback: bool,
               then: Callable[[], None] | None = None) -> threading.Event:
        """Queue ``ranges``; the event is set once the thread has handled them all, and then
        ``then`` runs on the submitting thread's running event loop (not without one)."""
        done = threading.Event()
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._put((ranges, writeback, done, loop if then is not None else None, then, False))
        return done

    def submit_read(self, ranges: list[Range]) -> bool:
        """Queue read-behind ``ranges`` (evicted without writeback) unless ``max_read_jobs``
        such jobs are already waiting: then False, nothing queued."""
        if not self._read_slots.acquire(blocking=False):
            return False
        self._put((ranges, False, threading.Event(), None, None, True))
        return True

    def _put(self, job: tuple) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="drop-behind", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _main(self) -> None:
        while True:
            ranges, writeback, done, loop, then, read_slot = self._jobs.get()
            for path, first, count in ranges:
                self._evict(path, first, count, writeback)
            if read_slot:
                self._read_slots.release()
            done.set()
            if loop is not None:
                try:
                    loop.call_soon_threadsafe(then)
                except RuntimeError:  # that loop is closed: nobody to follow up
                    pass

    def _evict(self, path: str, first: int, count: int, writeback: bool) -> None:
        """Never raises: the thread serves every later job whatever one of them meets."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # the segment was deleted meanwhile
            return
        except OSError as exc:
            self._report(path, first, count, exc)
            return
        try:
            if writeback:
                write_back(fd, first, count)
            start = first - first % FOLIO_ALIGN  # the folio across the previous range's end
            os.posix_fadvise(fd, start, first + count - start, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            self._report(path, first, count, exc)
        finally:
            os.close(fd)

    def _report(self, path: str, first: int, count: int, exc: OSError) -> None:
        if path not in self._failed:  # once per file
            self._remember_failed(path)
            log.error("write-behind of %s [%d, +%d) failed: %s (the range stays in the page "
                      "cache; an fsync of the file reports a write error too)",
                      path, first, count, exc)

    def _remember_failed(self, path: str) -> None:
        """Remember ``path`` as logged; past ``MAX_FAILED_PATHS`` forget the files no longer
        there (deleted segments: a new file of that name is another file), then, when still
        too many, the oldest half (such a file that fails again is logged again)."""
        self._failed[path] = None
        if len(self._failed) <= MAX_FAILED_PATHS:
            return
        self._failed = {p: None for p in self._failed if os.path.exists(p)}
        keep = MAX_FAILED_PATHS // 2
        if len(self._failed) > keep:
            self._failed = dict.fromkeys(list(self._failed)[len(self._failed) - keep:])


def write_back(fd: int, first: int, count: int) -> None:
    """Write the range's dirty pages to the device and wait (``fdatasync`` of the whole file
    where ``sync_file_range`` is missing). Raises OSError."""
    if SYNC_FILE_RANGE is None:
        os.fdatasync(fd)
        return
    if SYNC_FILE_RANGE(fd, first, count, _WAIT_WRITE_WAIT) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code) if code else "sync_file_range failed")


_shared: tuple[int, Evictor] | None = None


def shared_evictor() -> Evictor:
    """This process's evictor (a forked child gets its own)."""
    global _shared
    if _shared is None or _shared[0] != os.getpid():
        _shared = (os.getpid(), Evictor())
    return _shared[1]

