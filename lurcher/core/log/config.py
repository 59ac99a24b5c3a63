"""Settings of the storage layer (the ``system.segment`` / ``system.partition`` keys)."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from lurcher.core.log.host_memory import this_machines_window

GIB = 1024 * 1024 * 1024
MAX_SEGMENT_SIZE_BYTES = GIB
INLINE_WRITE_MAX_BYTES = 64 * 1024
RESERVE_AHEAD = 16 * 1024 * 1024

Clock = Callable[[], int]
"""Returns the current time in microseconds since the epoch."""


def wall_clock_us() -> int:
    return time.time_ns() // 1000


class LogConfig(msgspec.Struct, frozen=True):
    """``segment_size_bytes``: roll to a new segment once the open one reaches it (the
    Iggy default and maximum is 1 GiB). ``enforce_fsync``: ``append`` fsyncs the log and
    index before returning, unless ``group_commit``: then the caller collects the written
    descriptors with ``Partition.take_unsynced`` and fsyncs many batches at once.
    ``max_inflight_batches``: batches of one partition submitted to the disk and not yet
    written (``Partition.append_async``); more wait, unstamped, in arrival order.
    ``inline_write_max_bytes``: a batch this small, arriving while nothing is in flight, is
    written on the event loop (a page-cache copy of a few KiB costs less than the hand-off,
    see ``inline``); 0 = never, every write is asynchronous. ``page_cache_window``: the newest
    log bytes of a partition kept in the page cache; older ones are written back and evicted
    (``cache_window``); 0 = leave the cache to the kernel; by default what "auto" picks on
    this machine (``host_memory``). ``reserve_ahead``: the largest
    step of disk blocks reserved past a log's end for partitions writing big batches
    (``segment``); 0 = never. ``cap_stored_offsets``: at open, lower consumer offsets stored
    past the log's end (``Partition._cap_stored_offsets``); False for a replicated partition,
    whose missing messages come back at the same offsets from its group."""

    segment_size_bytes: int = GIB
    enforce_fsync: bool = False
    group_commit: bool = False
    max_inflight_batches: int = 8
    inline_write_max_bytes: int = INLINE_WRITE_MAX_BYTES
    page_cache_window: int = msgspec.field(default_factory=this_machines_window)
    reserve_ahead: int = RESERVE_AHEAD
    cap_stored_offsets: bool = True
