"""Partition: append, every read strategy (across segments), rotation, reopen, maintenance."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from log_helpers import MESSAGE_BYTES, FailingIo, RecordingIo, batch, messages, read_file

from lurcher.core.log import EMPTY, PollKind, PosixIo
from lurcher.core.log.faulty_io import FaultyIo
from lurcher.core.log.segment import Segment
from lurcher.core.wire.batch import INDEX_DTYPE
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def offsets_of(polled) -> list[int]:
    return [m[0] for m in messages(polled.to_bytes())]


def fill(p, clock, batches: int = 10, per_batch: int = 5) -> None:
    """Append ``batches`` batches; batch b gets timestamp 1000*(b+1)."""
    for b in range(batches):
        clock.now_us = 1000 * (b + 1)
        p.append(batch(per_batch, tag=b * per_batch))


def test_empty_partition(open_partition, part_dir):
    p = open_partition()
    assert (p.current_offset, p.messages_count, p.size_bytes, p.segments_count) == (0, 0, 0, 1)
    assert os.path.exists(os.path.join(part_dir, "00000000000000000000.log"))
    assert os.path.exists(os.path.join(part_dir, "00000000000000000000.index"))
    for kind in PollKind:
        assert p.poll(kind, 0, 10) is EMPTY


def test_append_assigns_offsets_and_writes_log_and_index(open_partition, clock, part_dir):
    p = open_partition()
    clock.now_us = 5555
    p.append(batch(3))
    p.append(batch(2, tag=3))
    assert (p.current_offset, p.next_offset, p.messages_count) == (4, 5, 5)
    assert p.size_bytes == 5 * MESSAGE_BYTES
    log = read_file(part_dir, "00000000000000000000.log")
    got = messages(log)
    assert [m[0] for m in got] == [0, 1, 2, 3, 4]
    assert [m[1] for m in got] == [5555] * 3 + [5556] * 2  # one per batch, increasing
    assert [m[2] for m in got] == [bytes([i]) * 10 for i in range(5)]
    index = np.frombuffer(read_file(part_dir, "00000000000000000000.index"), dtype=INDEX_DTYPE)
    assert index["offset"].tolist() == [0, 1, 2, 3, 4]
    assert index["position"].tolist() == [MESSAGE_BYTES * (i + 1) for i in range(5)]
    assert index["timestamp"].tolist() == [5555] * 3 + [5556] * 2


def test_one_write_for_log_and_one_for_index(open_partition):
    io = RecordingIo()
    p = open_partition(io=io)
    io.calls.clear()
    p.append(batch(100))
    assert io.calls == {"pwrite": 2}


def test_enforce_fsync(open_partition):
    io = RecordingIo()
    p = open_partition(io=io, enforce_fsync=True)
    io.calls.clear()
    p.append(batch(3))
    assert io.calls["fsync"] == 2


def test_flush_fsyncs_written_segments_once(open_partition):
    io = RecordingIo()
    p = open_partition(io=io)
    p.append(batch(3))
    io.calls.clear()
    p.flush(fsync=False)
    assert io.calls == {}
    p.flush(fsync=True)
    p.flush(fsync=True)
    assert io.calls == {"fsync": 2}


def test_batch_timestamps_increase_even_when_the_clock_goes_back(open_partition, clock):
    p = open_partition()
    clock.now_us = 2000
    p.append(batch(1))
    clock.now_us = 1000
    p.append(batch(2))
    assert [m[1] for m in messages(p.read_first(10).to_bytes())] == [2000, 2001, 2001]


def test_rotation_at_small_segment_size(open_partition, part_dir, clock):
    p = open_partition(segment_size_bytes=3 * MESSAGE_BYTES)
    fill(p, clock, batches=4, per_batch=2)   # 2 msgs, then full at 4 > 3 -> roll, ...
    names = sorted(os.listdir(part_dir))
    assert names == ["00000000000000000000.index", "00000000000000000000.log",
                     "00000000000000000004.index", "00000000000000000004.log",
                     "offsets"]
    assert p.segments_count == 2
    assert [s.count for s in p.segments] == [4, 4]
    assert p.messages_count == 8 and p.size_bytes == 8 * MESSAGE_BYTES


def held_entries(segment) -> int:
    """Entries the segment's in-memory index has room for."""
    return segment.index._entries.size


def test_sealed_segments_keep_no_spare_index_capacity(open_partition, part_dir, clock):
    """Each segment's index started with room for 1,024 entries (16 KiB) and kept it, and
    a sealed one kept up to twice its entries: 20,000 one-message segments held about
    310 MB. A sealed segment's index now holds its entries only, also after a reopen; the
    open one still grows, and so does a sealed one a cut made the open one again."""
    p = open_partition(segment_size_bytes=3 * MESSAGE_BYTES)
    fill(p, clock, batches=4, per_batch=2)
    assert [(s.count, held_entries(s)) for s in p.segments[:-1]] == [(4, 4)]
    assert held_entries(p.segments[-1]) >= 1024
    p.close()
    p = open_partition(segment_size_bytes=100 * MESSAGE_BYTES)
    assert [(s.count, held_entries(s)) for s in p.segments[:-1]] == [(4, 4)]
    p.truncate_to(3)  # the first segment is the open one again
    p.append(batch(5))
    assert p.segments_count == 1 and offsets_of(p.read_first(10)) == list(range(8))


def test_a_roll_over_that_cannot_create_its_files_is_logged_once(open_partition, part_dir,
                                                                   clock, caplog):
    """A directory where the next segment's log goes: each send that needs the roll-over is
    refused 4003 and nothing changes; one ERROR line names the partition, the file and the
    OS error (the old code logged nothing); once the way is clear the roll-over happens."""
    p = open_partition(segment_size_bytes=3 * MESSAGE_BYTES)
    fill(p, clock, batches=2, per_batch=2)  # full at 4 messages: the next send rolls over
    blocker = os.path.join(part_dir, f"{4:020d}.log")
    os.mkdir(blocker)
    with caplog.at_level(logging.WARNING, logger="lurcher.core.log.partition"):
        for _ in range(3):
            with pytest.raises(IggyError) as info:
                p.append(batch(1))
            assert info.value.code == ErrorCode.CANNOT_CREATE_SEGMENT_LOG_FILE
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert part_dir in lines[0] and blocker in lines[0] and "Is a directory" in lines[0]
    assert p.next_offset == 4 and p.segments_count == 1
    os.rmdir(blocker)
    p.append(batch(1))
    assert p.segments_count == 2 and p.next_offset == 5


def test_a_batch_is_never_split(open_partition):
    p = open_partition(segment_size_bytes=MESSAGE_BYTES)
    p.append(batch(10))          # larger than a segment: goes whole into the empty one
    p.append(batch(1))
    assert [s.count for s in p.segments] == [10, 1]
    assert p.segments[1].start_offset == 10


@pytest.fixture
def spread(open_partition, clock):
    """50 messages over segments of 12 messages (batches of 5: segments roll at 15)."""
    p = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    fill(p, clock, batches=10, per_batch=5)
    assert p.segments_count == 4
    return p


def test_read_by_offset_across_segments(spread):
    polled = spread.read_offset(7, 30)
    assert (polled.first_offset, polled.count, polled.last_offset) == (7, 30, 36)
    assert len(polled.ranges) == 3
    assert offsets_of(polled) == list(range(7, 37))
    got = messages(polled.to_bytes())
    assert [m[2] for m in got] == [bytes([o]) * 10 for o in range(7, 37)]


def test_pieces_are_the_ranges_bytes_one_per_range(spread):
    """What a QUIC reply holds (``PolledSlice.pieces``): one ``bytes`` per byte range, the
    messages' bytes; a file shorter than its range is an EOFError."""
    polled = spread.read_offset(7, 30)
    pieces = polled.pieces()
    assert [type(p) for p in pieces] == [bytes] * 3
    assert [len(p) for p in pieces] == [r.length for r in polled.ranges]
    assert [m[2] for m in messages(b"".join(pieces))] == [bytes([o]) * 10 for o in range(7, 37)]
    last = polled.ranges[-1]
    os.truncate(last.path, last.position + last.length - 1)
    with pytest.raises(EOFError, match="of"):
        polled.pieces()


def test_read_by_offset_edges(spread):
    assert spread.read_offset(50, 1) is EMPTY
    assert spread.read_offset(0, 0) is EMPTY
    assert offsets_of(spread.read_offset(49, 10)) == [49]
    assert offsets_of(spread.read_offset(45, 1000)) == list(range(45, 50))
    whole = spread.read_offset(0, 1000)
    assert whole.count == 50 and whole.total_bytes == 50 * MESSAGE_BYTES


def test_read_by_timestamp(spread):
    # batch b (offsets 5b..5b+4) has timestamp 1000*(b+1)
    assert offsets_of(spread.read_timestamp(3000, 7)) == list(range(10, 17))
    assert offsets_of(spread.read_timestamp(2500, 3)) == [10, 11, 12]
    assert offsets_of(spread.read_timestamp(0, 2)) == [0, 1]
    assert spread.read_timestamp(10_001, 5) is EMPTY
    assert offsets_of(spread.read_timestamp(10_000, 50)) == list(range(45, 50))


def linear_timestamp_answer(p, timestamp_us: int, count: int) -> list[int]:
    """What a timestamp poll answers, found by looking at every segment in turn."""
    for segment in p.segments:
        if segment.count and segment.last_timestamp >= timestamp_us:
            i = int(np.searchsorted(segment.index.timestamps, timestamp_us, side="left"))
            return offsets_of(p.read_offset(segment.start_offset + i, count))
    return []


@pytest.fixture
def many_segments(open_partition, part_dir, clock):
    """64 segments of one 2-message batch each (batch b: timestamp 1000*(b+1)), reopened
    with segments 20 and 22 (one after the other), 80 and the open one, 126, emptied (as
    a crash can leave them)."""
    p = open_partition(segment_size_bytes=2 * MESSAGE_BYTES)
    fill(p, clock, batches=64, per_batch=2)
    p.close()
    for start in (20, 22, 80, 126):
        for suffix in (".log", ".index"):
            os.truncate(os.path.join(part_dir, f"{start:020d}{suffix}"), 0)
    p = open_partition(segment_size_bytes=2 * MESSAGE_BYTES)
    assert p.segments_count == 64 and [s.count for s in p.segments].count(0) == 4
    return p


def test_read_by_timestamp_at_every_segment_boundary(many_segments):
    p = many_segments
    stamps = {0, 1, 10**18}
    for segment in p.segments:
        for t in (segment.first_timestamp, segment.last_timestamp):
            stamps |= {t - 1, t, t + 1}
    for t in sorted(stamps):
        assert offsets_of(p.read_timestamp(t, 3)) == linear_timestamp_answer(p, t, 3), t


def test_read_by_timestamp_bisects_the_segments(many_segments, monkeypatch):
    """Only a few segments' timestamps are looked at, wherever the answer is (the old code
    looked at each segment before the answer: 63 for the newest message)."""
    looked = []
    newest = Segment.last_timestamp

    def counted(segment):
        looked.append(segment.start_offset)
        return newest.fget(segment)

    monkeypatch.setattr(Segment, "last_timestamp", property(counted))
    for t in (1000, 11_000, 12_000, 33_000, 63_000, 63_001):
        looked.clear()
        many_segments.read_timestamp(t, 1)
        assert len(looked) <= 2 * 6 + 4, (t, looked)  # two bisections of 64 and a few more


def test_read_by_offset_over_many_segments_some_emptied(many_segments):
    p = many_segments
    stored = [o for o in range(126) if not 20 <= o < 24 and o not in (80, 81)]
    for start in range(-1, 130):
        first = next((o for o in stored if o >= start), None)
        want = [] if first is None else [o for o in stored if first <= o < first + 3]
        assert offsets_of(p.read_offset(start, 3)) == want, start


def test_a_poll_by_offset_bisects_the_segments(many_segments, monkeypatch):
    """Only a few segments' start offsets are read, wherever the poll starts (the old code
    listed all 64 segments' start offsets twice per poll: 140 reads)."""
    looked = []
    start_of = Segment.__dict__["start_offset"]

    def counted(segment):
        looked.append(1)
        return start_of.__get__(segment)

    monkeypatch.setattr(Segment, "start_offset", property(counted))
    for start in (0, 19, 40, 81, 125):
        looked.clear()
        assert offsets_of(many_segments.read_offset(start, 1))
        assert len(looked) <= 40, (start, len(looked))  # 2 bisections of 64, 2 segments read


def test_read_first_and_last(spread):
    assert offsets_of(spread.read_first(3)) == [0, 1, 2]
    assert offsets_of(spread.read_last(3)) == [47, 48, 49]
    assert offsets_of(spread.read_last(100)) == list(range(50))
    assert spread.read_last(0) is EMPTY


def test_read_next_uses_the_stored_offset(spread):
    assert offsets_of(spread.read_next("consumers", 7, 2)) == [0, 1]
    spread.store_offset("consumers", 7, 20)
    assert offsets_of(spread.read_next("consumers", 7, 2)) == [21, 22]
    assert offsets_of(spread.read_next("groups", 7, 1)) == [0]
    spread.store_offset("groups", 7, 49)
    assert spread.read_next("groups", 7, 1) is EMPTY


def test_poll_dispatches_wire_strategies(spread):
    spread.store_offset("groups", 2, 9)
    assert offsets_of(spread.poll(1, 3, 2)) == [3, 4]
    assert offsets_of(spread.poll(2, 2000, 1)) == [5]
    assert offsets_of(spread.poll(3, 0, 1)) == [0]
    assert offsets_of(spread.poll(4, 0, 1)) == [49]
    assert offsets_of(spread.poll(5, 0, 1, consumer=("groups", 2))) == [10]


def test_reopen_gives_identical_bytes(spread, open_partition):
    before = spread.read_offset(0, 100).to_bytes()
    counters = (spread.current_offset, spread.messages_count, spread.size_bytes,
                spread.segments_count)
    spread.close()
    again = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    assert not any(r.changed for r in again.recovery.values())
    assert again.read_offset(0, 100).to_bytes() == before
    assert (again.current_offset, again.messages_count, again.size_bytes,
            again.segments_count) == counters
    again.append(batch(1))
    assert offsets_of(again.read_last(1)) == [50]


def test_reopen_keeps_timestamp_search(spread, open_partition):
    spread.close()
    again = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    assert offsets_of(again.read_timestamp(3000, 2)) == [10, 11]


def test_failed_write_leaves_the_partition_unchanged(open_partition):
    io = FailingIo()
    p = open_partition(io=io)
    p.append(batch(2))
    io.fail = True
    with pytest.raises(IggyError) as info:
        p.append(batch(3, tag=50))
    assert info.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    io.fail = False
    assert (p.next_offset, p.messages_count) == (2, 2)
    p.append(batch(1, tag=9))
    assert offsets_of(p.read_first(10)) == [0, 1, 2]
    assert [m[2] for m in messages(p.read_first(10).to_bytes())][-1] == bytes([9]) * 10


def test_empty_batch_is_rejected(open_partition):
    from lurcher.core.wire.batch import MessageBatch
    with pytest.raises(IggyError) as info:
        open_partition().append(MessageBatch(0, memoryview(b""), memoryview(bytearray())))
    assert info.value.code == ErrorCode.INVALID_MESSAGES_COUNT


def test_delete_oldest_segments(spread, open_partition):
    assert spread.delete_oldest_segments(2) == (2, 30)
    assert spread.first_offset == 30
    assert spread.messages_count == 20 and spread.size_bytes == 20 * MESSAGE_BYTES
    assert offsets_of(spread.read_first(3)) == [30, 31, 32]
    assert offsets_of(spread.read_offset(0, 3)) == [30, 31, 32]
    assert spread.delete_oldest_segments(10) == (1, 15)   # never the open segment
    assert spread.segments_count == 1 and spread.first_offset == 45
    spread.close()
    again = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    assert (again.first_offset, again.current_offset, again.messages_count) == (45, 49, 5)


def test_segments_wholly_below_an_offset_go_and_the_first_kept_is_decided_before(spread):
    """A cluster's DeleteSegments: its primary decides the first offset kept, every replica
    deletes its sealed segments wholly below it (a segment straddling it stays)."""
    assert spread.first_kept_after(2) == 30
    assert spread.first_kept_after(10) == 45  # never the open segment
    assert spread.first_kept_after(2, barrier=20) == 15  # none past the barrier
    assert spread.first_kept_after(0) == 0
    assert spread.delete_segments_below(29) == (1, 15)  # 15..29 ends at 29: it stays
    assert spread.first_offset == 15
    assert spread.delete_segments_below(30) == (1, 15)
    assert spread.delete_segments_below(30) == (0, 0)  # executed again: nothing more
    assert spread.delete_segments_below(1000) == (1, 15)  # never the open segment
    assert spread.first_offset == 45


def test_a_log_skipped_ahead_starts_at_the_offset_and_keeps_nothing_below(
        spread, open_partition, clock):
    """A cluster replica whose peers deleted what it lacks starts its log where they keep."""
    spread.skip_to(30)  # not past its end (50): nothing changes
    assert (spread.first_offset, spread.next_offset) == (0, 50)
    spread.skip_to(70)
    assert (spread.first_offset, spread.next_offset, spread.messages_count) == (70, 70, 0)
    assert spread.read_offset(0, 10) is EMPTY
    spread.append(batch(5, tag=70))
    assert offsets_of(spread.read_offset(0, 10)) == [70, 71, 72, 73, 74]
    spread.close()
    again = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    assert (again.first_offset, again.next_offset, again.segments_count) == (70, 75, 1)


def test_a_cut_whose_segment_cannot_be_removed_ends_where_the_files_end(open_partition,
                                                                       clock, part_dir):
    io = FaultyIo(PosixIo(), "remove-eio", 3)  # the log of the second segment cut off
    p = open_partition(segment_size_bytes=12 * MESSAGE_BYTES, io=io)
    fill(p, clock, batches=10, per_batch=5)  # segments at 0, 15, 30 and 45
    with pytest.raises(OSError):
        p.truncate_to(5)
    assert [s.start_offset for s in p.segments] == [0, 15, 30]
    assert sorted(n for n in os.listdir(part_dir) if n.endswith(".log")) == [
        f"{start:020d}.log" for start in (0, 15, 30)]
    assert (p.current_offset, p.messages_count, p.size_bytes) == (44, 45, 45 * MESSAGE_BYTES)
    assert offsets_of(p.read_last(1)) == [44]
    p.close()
    again = open_partition(segment_size_bytes=12 * MESSAGE_BYTES)
    assert (again.current_offset, again.messages_count) == (44, 45)


def test_purge_restarts_at_zero_and_drops_offsets(spread, part_dir, open_partition):
    spread.store_offset("consumers", 1, 10)
    spread.store_offset("groups", 2, 11)
    spread.purge()
    assert (spread.current_offset, spread.messages_count, spread.size_bytes,
            spread.segments_count) == (0, 0, 0, 1)
    assert spread.get_offset("consumers", 1) is None and spread.get_offset("groups", 2) is None
    assert sorted(n for n in os.listdir(part_dir) if n != "offsets") == [
        "00000000000000000000.index", "00000000000000000000.log"]
    spread.append(batch(2))
    assert offsets_of(spread.read_first(10)) == [0, 1]
    spread.close()
    again = open_partition()
    assert again.get_offset("consumers", 1) is None and again.current_offset == 1


def test_created_at_comes_from_the_clock(open_partition, clock):
    clock.now_us = 777
    assert open_partition().created_at == 777
