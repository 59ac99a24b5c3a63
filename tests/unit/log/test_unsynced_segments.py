"""Per-round work over a partition of many small segments: a group-commit round
(``take_unsynced``) and a client's flush (``flush_async``) take exactly the segments written
since their last fsync, and look at those (the ones rolled over since the last round), not
at every segment held; retention bisects and stops early; a failed write restamps from the
newest segments. Work is counted through the ``Segment`` attributes each step reads, never
timed."""

from __future__ import annotations

import asyncio
import errno

import pytest
from log_helpers import FailingIo, batch

from lurcher.core.log.segment import Segment
from lurcher.core.shard.maintenance import expire_topic, trim_topic
from lurcher.core.wire.errors import IggyError

SEGMENTS = 200


def one_batch_segments(open_partition, clock, n: int = SEGMENTS, **kwargs):
    """A partition of ``n`` segments of one batch each (segment size 1 byte: every batch
    rolls over), batch b stamped 1000*(b+1)."""
    p = open_partition(segment_size_bytes=1, **kwargs)
    for b in range(n):
        clock.now_us = 1000 * (b + 1)
        p.append(batch(1, tag=b % 200))
    assert p.segments_count == n
    return p


def taken_starts(p, handles) -> list[int]:
    """Start offsets of the segments whose log files are among ``handles``."""
    paths = {handle.path for handle in handles}
    return [s.start_offset for s in p.segments if s.log_path in paths]


@pytest.fixture
def visits(monkeypatch) -> list[int]:
    """Counts every read of ``Segment.dirty`` (one per segment a round looks at)."""
    seen: list[int] = []
    slot = Segment.__dict__["dirty"]

    def read(segment):
        seen.append(1)
        return slot.__get__(segment)

    monkeypatch.setattr(Segment, "dirty", property(read, slot.__set__))
    return seen


def test_a_round_takes_every_written_segment_once(open_partition, clock):
    p = one_batch_segments(open_partition, clock)
    first = p.take_unsynced()
    assert taken_starts(p, first) == list(range(SEGMENTS))
    assert len(first) == 2 * SEGMENTS  # log and index of each
    assert p.take_unsynced() == []
    assert not any(s.dirty for s in p.segments)


def test_a_round_looks_only_at_the_segments_written_since_the_last(open_partition, clock,
                                                                   visits):
    """The old code looked at all 200 segments in every round."""
    p = one_batch_segments(open_partition, clock)
    p.take_unsynced()
    p.append(batch(1))  # rolls over: one new segment, written
    visits.clear()
    assert taken_starts(p, p.take_unsynced()) == [SEGMENTS]
    assert len(visits) <= 2, len(visits)
    visits.clear()
    assert p.take_unsynced() == []
    assert len(visits) <= 1, len(visits)


def test_roll_overs_between_rounds_are_all_taken(open_partition, clock, visits):
    p = one_batch_segments(open_partition, clock)
    p.take_unsynced()
    for tag in range(3):
        p.append(batch(1, tag=tag))
    visits.clear()
    assert taken_starts(p, p.take_unsynced()) == [SEGMENTS, SEGMENTS + 1, SEGMENTS + 2]
    assert len(visits) <= 5, len(visits)


def test_a_flush_looks_only_at_the_segments_written_since_the_last(open_partition, clock,
                                                                   visits):
    p = one_batch_segments(open_partition, clock)

    async def flush_twice() -> None:
        await p.flush_async()
        p.append(batch(1))
        visits.clear()
        await p.flush_async()

    asyncio.run(flush_twice())
    assert len(visits) <= 2, len(visits)
    assert not any(s.dirty for s in p.segments)


class FsyncFailsOnce:
    """Wraps a backend: the first ``fsync_in_worker`` raises EIO."""

    def __init__(self, io) -> None:
        self._io = io
        self.failed = False

    def fsync_in_worker(self, fd: int) -> None:
        if not self.failed:
            self.failed = True
            raise OSError(errno.EIO, "injected")
        self._io.fsync_in_worker(fd)

    def __getattr__(self, name):
        return getattr(self._io, name)


def test_segments_of_a_failed_flush_are_taken_again_after_roll_overs(open_partition, clock):
    """A flush that failed marks its segments written again; the next round takes them
    with those rolled over since, however far back they are."""
    p = one_batch_segments(open_partition, clock, n=20)
    p.io = FsyncFailsOnce(p.io)

    async def failed_flush() -> None:
        with pytest.raises(OSError):
            await p.flush_async()

    asyncio.run(failed_flush())
    for tag in range(3):
        p.append(batch(1, tag=tag))
    assert taken_starts(p, p.take_unsynced()) == list(range(23))
    assert p.take_unsynced() == []


def test_after_a_purge_the_new_segments_are_taken(open_partition, clock):
    p = one_batch_segments(open_partition, clock, n=50)
    p.take_unsynced()
    p.purge()
    for tag in range(4):
        p.append(batch(1, tag=tag))
    assert taken_starts(p, p.take_unsynced()) == [0, 1, 2, 3]


def test_a_cut_back_segment_written_again_is_taken(open_partition, clock):
    p = one_batch_segments(open_partition, clock, n=50)
    p.take_unsynced()
    p.truncate_to(10)  # segment 9 is the open one again
    p.append(batch(1))  # rolls over to a new segment at 10
    assert taken_starts(p, p.take_unsynced()) == [10]


def test_a_flush_fsyncs_what_no_round_took(open_partition, clock):
    p = one_batch_segments(open_partition, clock, n=20)
    p.take_unsynced()
    p.append(batch(1))
    p.flush(fsync=True)
    assert not any(s.dirty for s in p.segments)


def count_reads(monkeypatch, name: str) -> list[int]:
    """Counts every read of the ``Segment`` property ``name`` (one item per read)."""
    seen: list[int] = []
    read = getattr(Segment, name).fget

    def counted(segment):
        seen.append(1)
        return read(segment)

    monkeypatch.setattr(Segment, name, property(counted))
    return seen


@pytest.fixture
def end_reads(monkeypatch) -> list[int]:
    """Reads of ``Segment.end_offset`` (what retention bisects by)."""
    return count_reads(monkeypatch, "end_offset")


def test_deletable_segments_bisect(open_partition, clock, end_reads):
    """The old code read every sealed segment's end (199) per call."""
    p = one_batch_segments(open_partition, clock)
    for barrier, want in ((None, SEGMENTS - 1), (-1, 0), (0, 1), (57, 58), (10**9, 199)):
        end_reads.clear()
        assert p.deletable_segments(barrier) == want
        assert len(end_reads) <= 10, (barrier, len(end_reads))


def test_expiry_stops_at_the_first_segment_kept(open_partition, clock, end_reads):
    p = one_batch_segments(open_partition, clock)
    p.offsets.store("consumers", 1, 10**6)  # a barrier past everything: bisected
    end_reads.clear()
    assert expire_topic([p], now_us=3000, expiry_us=1000) == (2, 2)
    assert len(end_reads) <= 10, len(end_reads)
    assert p.first_offset == 2


def test_size_retention_costs_a_bisection_per_segment_deleted(open_partition, clock,
                                                              end_reads):
    """The old code read every sealed segment's end twice per segment deleted (about
    200 x 200 reads here)."""
    p = one_batch_segments(open_partition, clock)
    p.offsets.store("consumers", 1, 10**6)
    assert trim_topic([p], max_size_bytes=1) == (SEGMENTS - 1, SEGMENTS - 1)
    assert len(end_reads) <= 20 * SEGMENTS, len(end_reads)
    assert p.segments_count == 1 and p.first_offset == SEGMENTS - 1


@pytest.fixture
def timestamp_reads(monkeypatch) -> list[int]:
    return count_reads(monkeypatch, "last_timestamp")


def test_a_failed_write_looks_at_the_newest_segments_only(open_partition, clock,
                                                          timestamp_reads):
    """A refused write (a full disk: every send refused) restamps from the newest kept
    message; the old code read all 200 segments' last timestamps for each one."""
    io = FailingIo()
    p = one_batch_segments(open_partition, clock, io=io)
    newest = p.segments[-1].last_timestamp
    clock.now_us = 1  # the clock went back: the next batch is stamped after the newest kept
    io.fail = True
    timestamp_reads.clear()
    with pytest.raises(IggyError):
        p.append(batch(1))
    assert len(timestamp_reads) <= 2, len(timestamp_reads)
    io.fail = False
    p.append(batch(1))
    assert p.segments[-1].last_timestamp == newest + 1 and p.next_offset == SEGMENTS + 1
