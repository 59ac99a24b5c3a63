"""Polls of history (``core.log.history_reads``): a poll of bytes the drop-behind window
evicted is read into the page cache on the reader thread before its reply, one of cached
bytes goes out at once, a history poll asks for what follows it, a failed read still lets
the reply go (its own read reports the error), and queued read-aheads are bounded."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from log_helpers import fill_evicting, wait_evictor_idle

from lurcher.core.log import history_reads
from lurcher.core.log.config import LogConfig
from lurcher.core.log.history_reads import READER_THREAD, HistoryReads, cached
from lurcher.core.log.partition import Partition
from lurcher.core.log.slice import ByteRange, PolledSlice
from tests.support.page_cache import resident_pages

KIB = 1024
MIB = 1024 * KIB
BATCH = 64  # messages per batch of ``fill_evicting``


@pytest.fixture
def evicted(disk_dir):
    """A partition of about 8.3 MiB with a 1 MiB page-cache window, its old bytes evicted."""
    part = Partition.open(str(disk_dir / "p"), 1, LogConfig(page_cache_window=1 * MIB))
    fill_evicting(part, 128)
    wait_evictor_idle(part.cache_window.evictor)
    yield part
    part.close()


def expected_bytes(part: Partition, first: int, count: int) -> bytes:
    """What a poll must answer, read with a plain ``pread`` of the segment file."""
    polled = part.read_offset(first, count)
    (r,) = polled.ranges
    with open(r.path, "rb") as f:
        f.seek(r.position)
        return f.read(r.length)


async def drained() -> None:
    """Wait until the reader thread has run every job queued so far."""
    done = asyncio.get_running_loop().create_future()
    READER_THREAD.run(lambda: None, done.set_result)
    await asyncio.wait_for(done, 10)


async def test_a_poll_of_the_newest_bytes_is_not_history_and_goes_out_at_once(evicted):
    polled = evicted.read_last(BATCH)
    assert not polled.history
    assert evicted.history_reads.ready(polled) is None


async def test_evicted_history_is_read_into_the_page_cache_before_the_reply(evicted):
    polled = evicted.read_offset(0, 64 * BATCH)  # about 4.3 MB: read in, not only asked for
    assert polled.history and not cached(polled.ranges)
    warming = evicted.history_reads.ready(polled)
    assert warming is not None
    assert await asyncio.wait_for(warming, 10) is None
    assert cached(polled.ranges)
    (r,) = polled.ranges
    pages = resident_pages(r.path)[r.position // 4096:(r.position + r.length - 1) // 4096 + 1]
    assert all(pages)
    assert polled.to_bytes() == expected_bytes(evicted, 0, 64 * BATCH)
    again = evicted.read_offset(0, 64 * BATCH)  # now cached: no wait
    assert again.history and evicted.history_reads.ready(again) is None


async def test_a_history_poll_asks_for_the_bytes_after_it(evicted, monkeypatch):
    monkeypatch.setattr(history_reads, "AHEAD", 1 * MIB)
    polled = evicted.read_offset(0, BATCH)
    await asyncio.wait_for(evicted.history_reads.ready(polled), 10)
    await drained()
    (r,) = polled.ranges
    end = r.position + r.length
    ahead = range(end // 4096 + 1, (end + MIB) // 4096)
    beyond = range((end + 2 * MIB) // 4096, (end + 3 * MIB) // 4096)
    deadline = time.monotonic() + 10  # the advice starts reads the kernel finishes later
    while not all(resident_pages(r.path)[i] for i in ahead) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    resident = resident_pages(r.path)
    assert all(resident[i] for i in ahead)
    assert not any(resident[i] for i in beyond)


async def test_a_read_that_fails_still_lets_the_reply_go(tmp_path):
    """The warm-up's error is not the poll's: the reply's own read reports it."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 8192)
    write_only = os.open(path, os.O_WRONLY)
    try:
        polled = PolledSlice(0, 1, 0, (ByteRange(str(path), write_only, 0, 8192),), True)
        assert not cached(polled.ranges)  # EBADF: cannot tell, so read it off the loop
        warming = HistoryReads().ready(polled)
        assert await asyncio.wait_for(warming, 10) is None
        with pytest.raises(OSError):  # what the reply's read reports (CANNOT_READ_FILE)
            polled.pieces()
    finally:
        os.close(write_only)


async def test_read_aheads_waiting_for_the_reader_thread_are_bounded(disk_dir, monkeypatch):
    """Process-wide: history polls of any partitions queue at most ``MAX_AHEAD_JOBS``
    read-aheads behind a busy reader thread (more are dropped, they are advice)."""
    slots = history_reads._JobSlots(2)
    monkeypatch.setattr(history_reads, "_AHEAD_JOBS", slots)
    release = threading.Event()
    blocked = asyncio.get_running_loop().create_future()
    READER_THREAD.run(lambda: release.wait(10), blocked.set_result)
    fds = []
    try:
        for i in range(5):  # cached history polls of five partitions' files, each asking ahead
            path = disk_dir / f"{i:020d}.log"
            path.write_bytes(b"y" * 4096)
            fds.append(os.open(path, os.O_RDONLY))
            polled = PolledSlice(0, 1, 0, (ByteRange(str(path), fds[-1], 0, 4096),), True)
            assert HistoryReads().ready(polled) is None
        assert slots.free == 0
    finally:
        release.set()
        await asyncio.wait_for(blocked, 10)
        await drained()
        for fd in fds:
            os.close(fd)
    assert slots.free == 2


def test_a_reader_far_behind_the_last_one_asks_for_its_own_next_bytes():
    """One mark per file: a second reader further back (another consumer, a re-read) is
    not taken as already served by the first one's read-ahead."""
    reads, mib = HistoryReads(), 1024 * 1024
    ahead = history_reads.AHEAD

    def asked(position: int) -> list[tuple[int, int]]:
        wanted = reads._ahead_of([ByteRange("a.log", -1, position, mib)])
        reads._mark(wanted)
        return [(start, length) for _, start, length in wanted]

    assert asked(100 * mib) == [(101 * mib, ahead)]
    assert asked(101 * mib) == []  # the first reader, still well inside what was asked
    assert asked(10 * mib) == [(11 * mib, ahead)]  # far behind: its own bytes
    far = 11 * mib + ahead
    assert asked(far + 5 * mib) == [(far + 6 * mib, ahead)]  # the first again, past the mark
