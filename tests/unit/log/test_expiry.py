"""Retention helpers of the log: segment timestamps, expired and deletable segments,
the stored-offset barrier, and reopening after deletion (a manual clock, no sleeping)."""

from __future__ import annotations

import os

import pytest
from log_helpers import MESSAGE_BYTES, batch

SEGMENT_BYTES = 12 * MESSAGE_BYTES


@pytest.fixture
def spread(open_partition, clock):
    """Segments [0..14] ts 1000-3000, [15..29] ts 4000-6000, [30..44] ts 7000-9000 and the
    open one [45..49] ts 10000 (batches of 5, one timestamp per batch)."""
    p = open_partition(segment_size_bytes=SEGMENT_BYTES)
    for b in range(10):
        clock.now_us = 1000 * (b + 1)
        p.append(batch(5, tag=b * 5))
    assert [(s.start_offset, s.first_timestamp, s.last_timestamp) for s in p.segments] == [
        (0, 1000, 3000), (15, 4000, 6000), (30, 7000, 9000), (45, 10000, 10000)]
    return p


def test_empty_segment_is_never_expired(open_partition):
    p = open_partition()
    assert p.segments[0].first_timestamp == 0
    assert not p.segments[0].is_expired(10**12, 1)


@pytest.mark.parametrize("now_us, expected", [
    (3999, 0),     # newest message of segment 0 (3000) + expiry 1000 > now
    (4000, 1),     # exactly at expiry: expired
    (9999, 2),
    (10**9, 3),    # everything expired, still never the open segment
])
def test_expired_segments(spread, now_us, expected):
    assert spread.expired_segments(now_us, 1000) == expected


def test_delete_expired_segments_keeps_offsets(spread, open_partition, clock):
    assert spread.delete_expired_segments(7000, 1000) == (2, 30)
    assert (spread.first_offset, spread.messages_count, spread.size_bytes) == (
        30, 20, 20 * MESSAGE_BYTES)
    polled = spread.read_offset(0, 5)
    assert (polled.first_offset, polled.count) == (30, 5)
    clock.now_us = 20_000
    spread.append(batch(1))
    assert spread.current_offset == 50
    spread.close()
    again = open_partition(segment_size_bytes=SEGMENT_BYTES)
    assert (again.first_offset, again.current_offset, again.messages_count) == (30, 50, 21)


def test_a_sealed_segment_a_crash_emptied_does_not_stop_expiry(spread, open_partition,
                                                                part_dir):
    """Recovery can leave a sealed segment empty (its pages never reached the disk before a
    crash): the old code counted it never expired, so expiry stopped there for good and
    the expired segments after it stayed (here: only segment 0 was deleted)."""
    spread.close()
    for suffix in (".log", ".index"):
        os.truncate(os.path.join(part_dir, f"{15:020d}{suffix}"), 0)
    p = open_partition(segment_size_bytes=SEGMENT_BYTES)
    assert [s.count for s in p.segments] == [15, 0, 15, 5]
    assert p.expired_segments(5000, 1000) == 2  # segment 0 (to 3000) and the empty one
    assert p.expired_segments(2000, 1000) == 0
    assert p.delete_expired_segments(10**9, 1000) == (3, 30)
    assert [s.start_offset for s in p.segments] == [45] and p.first_offset == 45


def test_barrier_keeps_unconsumed_segments(spread):
    assert spread.min_stored_offset() is None
    spread.store_offset("consumers", 7, 20)
    spread.store_offset("groups", 1, 40)
    assert spread.min_stored_offset() == 20
    assert spread.deletable_segments(20) == 1          # segment [15..29] holds offset 21+
    assert spread.expired_segments(10**9, 1, barrier=20) == 1
    assert spread.delete_oldest_segments(3, barrier=20) == (1, 15)
    assert spread.deletable_segments(29) == 1 and spread.deletable_segments(None) == 2


def test_delete_everything_but_the_open_segment_then_roll(spread, open_partition):
    assert spread.delete_oldest_segments(99) == (3, 45)
    assert spread.deletable_segments() == 0
    spread.close()
    again = open_partition(segment_size_bytes=SEGMENT_BYTES)
    assert (again.first_offset, again.current_offset, again.segments_count) == (45, 49, 1)


def test_a_segment_whose_log_cannot_be_set_aside_keeps_every_segment(spread, monkeypatch):
    """The second segment's log cannot be renamed aside (a directory that refuses, EPERM):
    the deletion is all or nothing, so the first segment's files are put back and every
    segment stays, in memory as on disk, with its counters; once renames work they go.
    (Until segment files were set aside before their removal, the first one was deleted.)"""
    io = spread.files.io
    real_replace = io.replace
    refused = spread.segments[1].log_path

    def replace(src, dst, folder=None):
        if src == refused:
            raise PermissionError(1, "Operation not permitted (injected)", src)
        real_replace(src, dst, folder)

    monkeypatch.setattr(io, "replace", replace)
    with pytest.raises(OSError):
        spread.delete_oldest_segments(3)
    assert [s.start_offset for s in spread.segments] == [0, 15, 30, 45]
    assert (spread.first_offset, spread.messages_count, spread.size_bytes) == (
        0, 50, 50 * MESSAGE_BYTES)
    assert spread.read_offset(0, 1).first_offset == 0
    assert not [n for n in os.listdir(spread.path) if n.endswith(".purged")]
    monkeypatch.setattr(io, "replace", real_replace)
    assert spread.delete_oldest_segments(3) == (3, 45)


def test_a_segment_file_that_cannot_be_removed_is_removed_at_the_next_open(
        spread, open_partition, monkeypatch):
    """Set aside, the second segment's log cannot be removed (EPERM): the deletion is done
    all the same (the segments are gone), the file stays under its set-aside name, never
    read, and the next open removes it."""
    io = spread.files.io
    real_remove = io.remove
    refused = spread.segments[1].log_path + ".purged"

    def remove(path, folder=None):
        if path == refused:
            raise PermissionError(1, "Operation not permitted (injected)", path)
        real_remove(path, folder)

    monkeypatch.setattr(io, "remove", remove)
    assert spread.delete_oldest_segments(2) == (2, 30)
    assert [s.start_offset for s in spread.segments] == [30, 45]
    assert [n for n in os.listdir(spread.path) if n.endswith(".purged")] == [
        os.path.basename(refused)]
    monkeypatch.setattr(io, "remove", real_remove)
    spread.close()
    again = open_partition(segment_size_bytes=SEGMENT_BYTES)
    assert (again.first_offset, again.messages_count) == (30, 20)
    assert not [n for n in os.listdir(again.path) if n.endswith(".purged")]
