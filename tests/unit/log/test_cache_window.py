"""Drop-behind (``core.log.cache_window``): which log ranges a partition hands back to the
kernel, and, on a real partition on disk, that they leave the page cache while the newest
window and everything stored stay intact."""

from __future__ import annotations

import logging
import mmap
import os
import threading

import pytest
from log_helpers import fill_evicting, wait_evictor_idle

from lurcher.core.log.cache_window import CacheWindow, Evictor, write_back
from lurcher.core.log.config import LogConfig
from lurcher.core.log.partition import Partition
from lurcher.core.wire.batch import MessageBatch
from tests.support.page_cache import resident_pages

KIB = 1024
MIB = 1024 * KIB


class FakeSegment:
    def __init__(self, start_offset: int, size_bytes: int) -> None:
        self.start_offset = start_offset
        self.size_bytes = size_bytes
        self.log_path = f"{start_offset:020d}.log"


class RecordingEvictor:
    """Records what would be evicted; its jobs finish when the test says."""

    def __init__(self) -> None:
        self.jobs: list[tuple[list, bool]] = []
        self.done: list[threading.Event] = []
        self.then: list = []

    def submit(self, ranges, writeback, then=None):
        self.jobs.append((ranges, writeback))
        self.done.append(threading.Event())
        self.then.append(then)
        return self.done[-1]

    def submit_read(self, ranges):
        self.submit(ranges, False)
        return True

    def finish(self, i: int) -> None:
        self.done[i].set()
        if self.then[i] is not None:
            self.then[i]()


def test_nothing_is_planned_until_a_step_past_the_window():
    segments = [FakeSegment(0, 0)]
    window = CacheWindow(4 * MIB, lambda: segments, RecordingEvictor())
    assert window.step == 2 * MIB
    segments[0].size_bytes = 4 * MIB + 2 * MIB - 1
    assert window.plan(segments) == []
    segments[0].size_bytes += 1
    assert window.plan(segments) == [(segments[0].log_path, 0, 2 * MIB)]
    segments[0].size_bytes += 1 * MIB  # the cursor moved: only a new step counts
    assert window.plan(segments) == []


def test_ranges_span_segments_and_keep_the_newest_window():
    segments = [FakeSegment(0, 0)]
    window = CacheWindow(4 * MIB, lambda: segments, RecordingEvictor())
    segments[0].size_bytes = 5 * MIB
    segments += [FakeSegment(1000, 6 * MIB), FakeSegment(2000, 1 * MIB)]
    ranges = window.plan(segments)
    assert ranges == [(segments[0].log_path, 0, 5 * MIB), (segments[1].log_path, 0, 3 * MIB)]
    kept = sum(s.size_bytes for s in segments) - sum(r[2] for r in ranges)
    assert kept == 4 * MIB


def test_a_cursor_whose_segment_went_restarts_at_the_newest_segment():
    segments = [FakeSegment(0, 0)]
    window = CacheWindow(2 * MIB, lambda: segments, RecordingEvictor())
    segments[0].size_bytes = 10 * MIB
    window.plan(segments)
    survivors = [FakeSegment(5000, 7 * MIB)]  # the cursor's segment was deleted
    assert window.plan(survivors) == [(survivors[0].log_path, 0, 5 * MIB)]


def test_a_cut_segment_clamps_the_cursor():
    segments = [FakeSegment(0, 0)]
    window = CacheWindow(2 * MIB, lambda: segments, RecordingEvictor())
    segments[0].size_bytes = 10 * MIB
    assert window.plan(segments)[0][2] == 8 * MIB
    segments[0].size_bytes = 3 * MIB  # truncated below the cursor
    assert window.plan(segments) == []
    segments[0].size_bytes = 8 * MIB
    assert window.plan(segments) == [(segments[0].log_path, 3 * MIB, 3 * MIB)]


def test_one_job_per_partition_in_flight():
    segments = [FakeSegment(0, 0)]
    evictor = RecordingEvictor()
    window = CacheWindow(2 * MIB, lambda: segments, evictor)
    for _ in range(8):
        segments[0].size_bytes += 1 * MIB
        window.committed(1 * MIB)
    assert len(evictor.jobs) == 1 and evictor.jobs[0][1] is True
    evictor.finish(0)  # the follow-up takes what was committed meanwhile, with no new commit
    assert len(evictor.jobs) == 2
    assert evictor.jobs[1][0] == [(segments[0].log_path, 1 * MIB, 5 * MIB)]
    evictor.finish(1)
    assert len(evictor.jobs) == 2  # nothing past the window is left


def test_a_zero_window_never_plans():
    segments = [FakeSegment(0, 0)]
    evictor = RecordingEvictor()
    window = CacheWindow(0, lambda: segments, evictor)
    segments[0].size_bytes = 100 * MIB
    window.committed(100 * MIB)
    window.read(segments[0], 0)
    assert evictor.jobs == []


def test_reads_below_the_cursor_evict_behind_the_reader_only():
    segments = [FakeSegment(0, 0)]
    evictor = RecordingEvictor()
    window = CacheWindow(8 * MIB, lambda: segments, evictor)  # step 4 MiB, read step 1 MiB
    segments[0].size_bytes = 20 * MIB
    window.plan(segments)  # cursor at 12 MiB
    window.read(segments[0], 15 * MIB)  # inside the window: left alone
    assert evictor.jobs == []
    window.read(segments[0], 1 * MIB)
    assert evictor.jobs == []  # not a read step behind yet
    window.read(segments[0], 3 * MIB)
    assert evictor.jobs == [([(segments[0].log_path, 0, 2 * MIB)], False)]
    window.read(segments[0], 3 * MIB + 512 * KIB)
    assert len(evictor.jobs) == 1


def test_read_behind_jobs_waiting_for_a_stalled_thread_are_bounded():
    """With the thread stuck, at most ``max_read_jobs`` read-behind jobs wait; a reader whose
    range was refused keeps its mark, and a later poll hands over the whole range."""
    evictor = Evictor(max_read_jobs=2)
    release, stuck = threading.Event(), threading.Event()
    evict = evictor._evict

    def stalled(path, first, count, writeback):
        stuck.set()
        release.wait(30)
        evict(path, first, count, writeback)

    evictor._evict = stalled
    evictor.submit([("stall.log", 0, 1)], writeback=True)
    assert stuck.wait(30)
    assert [evictor.submit_read([("r.log", 0, 1)]) for _ in range(3)] == [True, True, False]
    segments = [FakeSegment(0, 20 * MIB)]
    window = CacheWindow(8 * MIB, lambda: segments, evictor)  # read step 1 MiB
    window.plan(segments)  # cursor at 12 MiB: below it is history
    window.read(segments[0], 3 * MIB)
    assert window._read_marks.get(0, 0) == 0  # refused: nothing handed over, mark kept
    release.set()
    evictor.submit([], writeback=False).wait(30)  # the thread is idle again
    window.read(segments[0], 3 * MIB)
    assert window._read_marks[0] == 2 * MIB  # all of 0..2 MiB handed over now


def test_write_back_reports_errors():
    r, w = os.pipe()
    try:
        with pytest.raises(OSError):
            write_back(r, 0, 4096)
    finally:
        os.close(r)
        os.close(w)


# -- a real partition on disk ------------------------------------------------------------------

def test_ranges_handed_over_one_after_another_leave_no_page_cached(disk_dir):
    """Eviction ranges end anywhere (committed positions, a reader's position), and the page
    cache holds large folios: a folio across one range's end must go with the next range."""
    path = str(disk_dir / "folios.log")
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    try:
        for i in range(160):  # a log written in batches of 68 KB
            os.pwrite(fd, bytes([i]) * 68 * KIB, i * 68 * KIB)
        size = os.fstat(fd).st_size
        for _ in range(2):  # read sequentially: the kernel's readahead makes large folios
            os.pread(fd, size, 0)
    finally:
        os.close(fd)
    evictor, step, handed = Evictor(), 512 * KIB + 12345, 0
    while handed + step <= size - 2 * MIB:
        evictor.submit([(path, handed, step)], writeback=True)
        handed += step
    wait_evictor_idle(evictor)
    stuck = sum(resident_pages(path)[:handed // mmap.PAGESIZE])
    assert stuck == 0, f"{stuck} pages of the handed-over ranges still cached"


def test_a_partition_keeps_only_its_newest_window_cached(disk_dir, segment_writes):
    part = Partition.open(str(disk_dir / "p"), 1, LogConfig(page_cache_window=1 * MIB))
    evictor = part.cache_window.evictor
    fill_evicting(part, 128)  # 128 x 68,096 bytes, about 8.3 MiB
    wait_evictor_idle(evictor)
    path = part.segments[-1].log_path
    resident = resident_pages(path)
    size = os.path.getsize(path)
    old = resident[:(size - 2 * MIB) // mmap.PAGESIZE]
    new = resident[-(1 * MIB // mmap.PAGESIZE):]
    assert sum(old) <= len(old) // 20, f"{sum(old)} of {len(old)} old pages still cached"
    if segment_writes == "page-cache":  # O_DIRECT writes never enter the cache
        assert all(new), "the newest window left the page cache"
    assert part.read_offset(0, 64 * 128).count == 64 * 128  # nothing stored changed
    part.close()


def test_reading_history_evicts_behind_the_reader(disk_dir):
    part = Partition.open(str(disk_dir / "p"), 1, LogConfig(page_cache_window=1 * MIB))
    evictor = part.cache_window.evictor
    fill_evicting(part, 128)
    wait_evictor_idle(evictor)
    path = part.segments[-1].log_path
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
        f.read()  # history back in the cache, as a reader would bring it
    for first in range(0, 64 * 96, 64):
        assert part.read_offset(first, 64).count == 64
    wait_evictor_idle(evictor)
    resident = resident_pages(path)
    behind = resident[:(64 * 80 * 1064) // mmap.PAGESIZE]
    assert sum(behind) <= len(behind) // 20, f"{sum(behind)} of {len(behind)} read pages cached"
    part.close()


def test_a_failed_write_back_is_logged_once(tmp_path, caplog):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    keep_open = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # so the evictor's open does not block
    try:
        evictor = Evictor()
        with caplog.at_level(logging.ERROR, logger="lurcher.core.log.cache_window"):
            evictor.submit([(fifo, 0, 4096), (fifo, 4096, 4096)], writeback=True).wait(10)
        errors = [r for r in caplog.records if "write-behind" in r.getMessage()]
        assert len(errors) == 1 and fifo in errors[0].getMessage()
    finally:
        os.close(keep_open)


def test_a_file_that_cannot_be_opened_is_logged_and_later_jobs_still_run(tmp_path, caplog):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x" * 8192)
    evictor = Evictor()
    with caplog.at_level(logging.ERROR, logger="lurcher.core.log.cache_window"):
        evictor.submit([(str(plain / "below-a-file"), 0, 4096)], writeback=True).wait(10)
        assert evictor.submit([(str(plain), 0, 4096)], writeback=True).wait(10)
    errors = [r.getMessage() for r in caplog.records if "write-behind" in r.getMessage()]
    assert len(errors) == 1 and "below-a-file" in errors[0]



def _partition_with_recorded_evictions(tmp_path) -> tuple[Partition, RecordingEvictor]:
    """A partition of 1 MiB segments and a 1 MiB window, 60 batches of 68 KB appended (four
    segments; a job handed over and done, the cursor in the third segment)."""
    part = Partition.open(str(tmp_path / "p"), 1,
                          LogConfig(page_cache_window=1 * MIB, segment_size_bytes=1 * MIB))
    evictor = RecordingEvictor()
    part.cache_window.evictor = evictor
    for i in range(60):
        part.append(MessageBatch.build([bytes([i]) * 1000] * 64).writable())
    evictor.finish(0)
    return part, evictor


def test_after_a_purge_polls_of_the_new_segment_evict_nothing(tmp_path):
    """The old code left the cursor on a purged segment (start 2048): every poll of the new
    segment (start 0) counted as history and handed the newest bytes over for eviction."""
    part, evictor = _partition_with_recorded_evictions(tmp_path)
    cursor = part.cache_window._segment
    assert cursor.start_offset > 0 and cursor is not part.segments[-1]
    part.purge()
    for i in range(12):  # 816 KB: all of it inside the window
        part.append(MessageBatch.build([bytes([i]) * 1000] * 64).writable())
    jobs = len(evictor.jobs)
    for first in range(0, 64 * 12, 64):
        assert part.read_offset(first, 64).count == 64
    assert evictor.jobs[jobs:] == []
    assert part.cache_window._segment is part.segments[0]  # the purged one is not kept
    part.close()


def test_deleted_segments_move_the_cursor_to_the_first_live_one_after_them(tmp_path):
    part, _ = _partition_with_recorded_evictions(tmp_path)
    cursor = part.cache_window._segment
    at = part.segments.index(cursor)
    assert part.delete_oldest_segments(at + 1)[0] == at + 1 and part.segments
    assert part.cache_window._segment is part.segments[0]
    assert part.cache_window._position == 0
    part.close()


class CountedSegment(FakeSegment):
    """A fake segment that counts the reads of its start offset (into ``reads``)."""

    reads = [0]

    def __init__(self, start_offset: int, size_bytes: int) -> None:
        self._start = start_offset
        super().__init__(start_offset, size_bytes)

    @property
    def start_offset(self) -> int:
        CountedSegment.reads[0] += 1
        return self._start

    @start_offset.setter
    def start_offset(self, value: int) -> None:
        self._start = value


def test_follow_does_not_walk_every_segment():
    """Retention deletes segments one at a time and the window follows after each: with
    2,000 segments the earlier ``follow`` read every segment's start offset each time."""
    segments = [CountedSegment(1000 * i, 1 * MIB) for i in range(2000)]
    window = CacheWindow(8 * MIB, lambda: segments, RecordingEvictor())
    window.plan(segments)
    for i in (3, 5, 7):
        window._read_marks[segments[i].start_offset] = 1024
    del segments[:4]  # segment 3 and its read mark go
    CountedSegment.reads[0] = 0
    window.follow()
    assert CountedSegment.reads[0] <= 100, CountedSegment.reads[0]
    assert sorted(window._read_marks) == [5000, 7000]


class CountingList(list):
    """A list that counts the reads of its items (into ``reads``)."""

    def __init__(self, items) -> None:
        super().__init__(items)
        self.reads = 0

    def __getitem__(self, i):
        self.reads += 1
        return super().__getitem__(i)


def test_follow_finds_a_cursor_far_behind_the_newest_segment_by_bisection():
    """A partition of small segments holding less than its window keeps the cursor on the
    segment it was opened with; retention deleting segments one at a time has it follow
    after each. The earlier ``follow`` walked back from the newest segment to the cursor
    each time: about 2,000 reads per deletion here (1.2 s for 5,000 one-batch segments
    trimmed on the event loop)."""
    segments = CountingList([FakeSegment(0, 100)])
    window = CacheWindow(8 * MIB, lambda: segments, RecordingEvictor())
    segments.extend(FakeSegment(i, 100) for i in range(1, 2000))
    window.follow()
    assert window._segment is segments[0]
    for gone in range(1, 50):
        del segments[:1]  # retention deletes the oldest: the cursor's, then the ones after
        segments.reads = 0
        window.follow()
        assert segments.reads <= 30, segments.reads
        assert window._segment is list.__getitem__(segments, 0)
        assert window._segment.start_offset == gone and window._position == 0


def test_the_files_remembered_as_logged_are_bounded(tmp_path, caplog, monkeypatch):
    """Each failing file is logged once, but what is remembered is bounded: files no longer
    there (deleted segments) are forgotten first, and one still there and still failing is
    not logged again. The old evictor remembered all 40 here (a set that grew for the
    server's life)."""
    from lurcher.core.log import cache_window
    monkeypatch.setattr(cache_window, "MAX_FAILED_PATHS", 8, raising=False)
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    keep_open = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # so the evictor's open does not block
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    gone = [(str(plain / f"gone-{i}"), 0, 4096) for i in range(40)]  # cannot be opened
    evictor = Evictor()
    try:
        with caplog.at_level(logging.ERROR, logger="lurcher.core.log.cache_window"):
            evictor.submit([(fifo, 0, 4096)] + gone + [(fifo, 0, 4096)],
                           writeback=True).wait(10)
            assert evictor.submit([(fifo, 4096, 4096)], writeback=True).wait(10)
    finally:
        os.close(keep_open)
    logged = [r.getMessage() for r in caplog.records if "write-behind" in r.getMessage()]
    assert len(logged) == 41 and sum(fifo + " " in m for m in logged) == 1
    assert len(evictor._failed) <= 8
    assert fifo in evictor._failed


def test_a_job_for_a_deleted_or_replaced_file_is_a_no_op(tmp_path, caplog):
    """A job queued before a purge: its file removed, or another (shorter) file of the
    same name there now. Nothing is logged, and the thread serves the next job."""
    deleted, replaced = tmp_path / "00000000000000000000.log", tmp_path / "replaced.log"
    for path in (deleted, replaced):
        path.write_bytes(b"x" * (4 * MIB))
    deleted.unlink()
    replaced.unlink()
    replaced.write_bytes(b"y" * 100)  # the new segment, shorter than the old range
    evictor = Evictor()
    with caplog.at_level(logging.DEBUG, logger="lurcher.core.log.cache_window"):
        assert evictor.submit([(str(deleted), 0, 4 * MIB), (str(replaced), 2 * MIB, 2 * MIB)],
                              writeback=True).wait(10)
        assert evictor.submit([(str(replaced), 0, 100)], writeback=True).wait(10)
    assert [r.getMessage() for r in caplog.records] == []
    assert replaced.read_bytes() == b"y" * 100 and not evictor._failed
