"""Polls of history without the event loop waiting for the device.

A poll that reads below its partition's drop-behind cursor (``CacheWindow``: bytes older
than the page-cache window, evicted once) may find its bytes only on the device. Read where
the reply is sent (``pread`` or ``sendfile`` on the event loop), it would stall every
connection of the shard for the read: 2.6 ms per MiB on this project's VM, reading 1 MiB at
a time and leaving the kernel's readahead to guess.

What ``HistoryReads`` does, per partition, for a slice marked ``history``:

- ``ready(polled)`` probes whether its bytes are in the page cache: a one-byte ``preadv``
  with ``RWF_NOWAIT`` (EAGAIN when the page is not cached; it never waits) at the first
  byte of each range, every ``PROBE_STRIDE`` bytes after it and at its last byte. All
  cached: None, the reply goes out at once. Else a future that resolves once the reader
  thread has read the ranges into the page cache (``POSIX_FADV_WILLNEED`` over them, then
  reading them through into a scratch buffer); the reply is sent after, from the cache.
- Read-ahead: the ``AHEAD`` bytes after a history poll's ranges are asked for
  (``POSIX_FADV_WILLNEED``, on the reader thread) once the reader comes within half of
  what was asked before, so a sequential reader of history finds its next polls cached
  and the device reads in big requests (a raw probe: 1.45 GB/s against 0.44 GB/s reading
  1 MiB at a time).

Invariants: the event loop makes no call that waits for the device (the probe does not
wait for a read; like any read it may update the file's access time); the future never
fails (a read error here is left to the reply's own read, which reports it as
CANNOT_READ_FILE); the reader thread's queue holds at most one warm-up per connection
awaiting its reply (skipped once nobody waits for it), plus ``MAX_AHEAD_JOBS`` read-aheads,
process-wide (more are dropped: they are advice); a job holds the poll's ranges, whose
handles keep their descriptors open while it runs. The read-ahead marks of a partition are
at most ``MAX_MARKS`` files.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from lurcher.core.log.io import WriterThread

log = logging.getLogger(__name__)

AHEAD = 8 * 1024 * 1024
PROBE_STRIDE = 256 * 1024
MAX_AHEAD_JOBS = 16
MAX_MARKS = 64
SCRATCH_BYTES = 1024 * 1024

READER_THREAD = WriterThread("lurcher-reader")  # the process's (the shard's) history reads
_scratch = memoryview(bytearray(SCRATCH_BYTES))  # used by the reader thread only
_probe = bytearray(1)  # used by the event loop thread only
_NOWAIT = getattr(os, "RWF_NOWAIT", None)
_TEST_DELAY_S = float(os.environ.get("TEST_LURCHER_HISTORY_READ_DELAY_S") or 0)


def cached(ranges: Any) -> bool:
    """Whether the probed bytes of every range are in the page cache (module docstring);
    False where the file system cannot tell without waiting."""
    if _NOWAIT is None:
        return False
    for r in ranges:
        last = r.position + r.length - 1
        for position in [*range(r.position, last, PROBE_STRIDE), last]:
            try:
                os.preadv(r.fd, [_probe], position, _NOWAIT)
            except OSError:  # EAGAIN: not cached; EOPNOTSUPP: cannot tell
                return False
    return True


def _advise(fd: int, position: int, length: int) -> None:
    os.posix_fadvise(fd, position, length, os.POSIX_FADV_WILLNEED)


def _read_through(fd: int, position: int, length: int) -> None:
    """Read ``length`` bytes from ``position`` into the scratch buffer (they are then in
    the page cache); stops early at the end of the file."""
    end = position + length
    while position < end:
        n = os.preadv(fd, [_scratch[:min(SCRATCH_BYTES, end - position)]], position)
        if n <= 0:
            return
        position += n


class HistoryReads:
    """The history reads of one partition (module docstring)."""

    __slots__ = ("_marks",)

    def __init__(self) -> None:
        self._marks: dict[str, int] = {}  # log path -> asked for up to this byte

    def ready(self, polled: Any) -> asyncio.Future | None:
        """None when ``polled`` can be sent at once; else a future resolved (never failed)
        once its bytes are in the page cache. Asks for the bytes after it either way."""
        if not polled.history:
            return None
        ahead = self._ahead_of(polled.ranges)
        if cached(polled.ranges):
            if ahead and _AHEAD_JOBS.take():
                self._mark(ahead)
                READER_THREAD.run(lambda: _ask_for(ahead), _AHEAD_JOBS.give_back)
            return None
        self._mark(ahead)
        warmed = asyncio.get_running_loop().create_future()
        READER_THREAD.run(lambda: _warm(polled.ranges, ahead, warmed),
                          lambda error: _resolve(warmed, error))
        return warmed

    def _ahead_of(self, ranges: Any) -> list[Ahead]:
        """What to ask for after each range: from the end of what was asked before when the
        reader is at most ``AHEAD`` behind that, else (another reader further back, a file
        purged and written again) from the range's end; nothing while the reader is still
        more than half of ``AHEAD`` behind it."""
        ahead = []
        for r in ranges:
            end = r.position + r.length
            mark = self._marks.get(r.path, 0)
            leading = mark - AHEAD <= end
            if leading and end <= mark - AHEAD // 2:
                continue
            start = max(mark, end) if leading else end
            ahead.append((r, start, end + AHEAD - start))
        return ahead

    def _mark(self, ahead: list[Ahead]) -> None:
        for r, start, length in ahead:
            if len(self._marks) >= MAX_MARKS and r.path not in self._marks:
                self._marks.clear()
            self._marks[r.path] = start + length


Ahead = tuple[Any, int, int]
"""(the poll's ``ByteRange``, whose handle keeps its file open; position; length)."""


class _JobSlots:
    """The read-aheads that may wait for the reader thread at once, process-wide (taken and
    given back on the event loop)."""

    def __init__(self, slots: int) -> None:
        self.free = slots

    def take(self) -> bool:
        if self.free <= 0:
            return False
        self.free -= 1
        return True

    def give_back(self, error: OSError | None) -> None:
        self.free += 1
        if error is not None:
            log.debug("read-ahead of history failed: %s", error)


_AHEAD_JOBS = _JobSlots(MAX_AHEAD_JOBS)


def _ask_for(ahead: list[Ahead]) -> None:
    for r, position, length in ahead:
        _advise(r.fd, position, length)


def _warm(ranges: Any, ahead: list[Ahead], warmed: asyncio.Future) -> None:
    """On the reader thread: ask for the ranges and what follows them, then read the
    ranges through (after ``TEST_LURCHER_HISTORY_READ_DELAY_S``: a slow device, for
    tests). Nothing when nobody waits any more (the poll's connection went away)."""
    if _TEST_DELAY_S:
        time.sleep(_TEST_DELAY_S)
    if warmed.done():
        return
    for r in ranges:
        _advise(r.fd, r.position, r.length)
    _ask_for(ahead)
    for r in ranges:
        _read_through(r.fd, r.position, r.length)


def _resolve(warmed: asyncio.Future, error: OSError | None) -> None:
    if error is not None:
        log.debug("reading history into the page cache failed: %s (the reply's read "
                  "reports it)", error)
    if not warmed.done():
        warmed.set_result(None)
