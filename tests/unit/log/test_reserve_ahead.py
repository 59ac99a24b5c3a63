"""Reserve-ahead (``system.segment.reserve_ahead``, ``Segment.reservation``): a partition
writing big batches gets disk blocks reserved past its log's end with its submissions, the
file's size never changes, a sealed segment has none left, and what the open one did not
write goes back when it is closed (never cutting a write still in flight) or, after a crash,
when it is opened again."""

from __future__ import annotations

import os

import pytest
from log_helpers import HeldIo

from lurcher.core.log import LogConfig, Partition, PosixIo
from lurcher.core.log.io import reserve_space
from lurcher.core.log.segment import blocks_past_end
from lurcher.core.log.uring import open_uring_io
from lurcher.core.wire.batch import MessageBatch

MIB = 1024 * 1024
KIB = 1024
BACKENDS = [pytest.param(PosixIo, id="posix"), pytest.param(open_uring_io, id="uring")]


def big_batch(tag: int, nbytes: int) -> MessageBatch:
    """About ``nbytes`` of messages (64-byte headers plus payloads) with tagged payloads."""
    count = max(nbytes // (4 * KIB), 1)
    return MessageBatch.build([bytes([tag % 251]) * (4 * KIB - 64)] * count).writable()


def allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


def open_part(tmp_path, io=None, **config) -> Partition:
    return Partition.open(str(tmp_path / "p"), 1, LogConfig(**config), io=io or PosixIo())


async def append_all(part: Partition, batches: list[MessageBatch]) -> None:
    for batch in batches:
        await part.append_async(batch)


def stored(part: Partition) -> bytes:
    return part.read_offset(0, part.next_offset).to_bytes()


def has_blocks_past_end(path: str) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return blocks_past_end(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("batch_bytes,expected", [
    # reserved to 1 MiB + 64 KiB at once; asked again once a batch ends past 576 KiB
    (64 * KIB, [(64 * KIB, MIB)] + [None] * 8 + [(MIB + 64 * KIB, MIB)]),
    (32 * KIB, [None] * 10),  # a step of 16 such batches is under 1 MiB: never worth it
])
def test_a_step_is_sixteen_batches_asked_for_within_half_a_step(tmp_path, batch_bytes,
                                                                 expected):
    segment = open_part(tmp_path).segments[-1]
    got = [segment.reservation(end, batch_bytes, 16 * MIB, 1 << 30)
           for end in range(batch_bytes, 11 * batch_bytes, batch_bytes)]
    assert got == expected


def test_a_step_stops_at_the_largest_and_at_the_segment_size(tmp_path):
    segment = open_part(tmp_path).segments[-1]
    assert segment.reservation(4 * MIB, 4 * MIB, 16 * MIB, 1 << 30) == (4 * MIB, 16 * MIB)
    segment.reserved_to = 0
    assert segment.reservation(4 * MIB, 4 * MIB, 16 * MIB, 10 * MIB) == (4 * MIB, 6 * MIB)
    assert segment.reservation(10 * MIB, 4 * MIB, 16 * MIB, 10 * MIB) is None


@pytest.mark.page_cache_only
@pytest.mark.parametrize("make_io", BACKENDS)
async def test_big_batches_reserve_blocks_past_the_end_and_give_them_back_at_close(
        tmp_path, make_io):
    part = open_part(tmp_path, make_io())
    batches = [big_batch(i, 256 * KIB) for i in range(6)]
    await append_all(part, batches)
    written = b"".join(bytes(b.blob) for b in batches)  # as stamped and sent to the disk
    log_path = part.segments[-1].log_path
    size = os.path.getsize(log_path)
    assert size == part.size_bytes  # the file's size is the data's, reservation or not
    assert allocated(log_path) >= size + 2 * MIB  # 16 batches of 256 KiB ahead, less written
    assert stored(part) == written
    part.close()
    assert os.path.getsize(log_path) == size
    assert allocated(log_path) < size + 64 * KIB
    reopened = open_part(tmp_path)
    assert stored(reopened) == written
    reopened.close()


@pytest.mark.page_cache_only
async def test_reservations_stop_at_the_segment_size(tmp_path):
    part = open_part(tmp_path, segment_size_bytes=3 * MIB)
    await append_all(part, [big_batch(i, 512 * KIB) for i in range(10)])
    assert len(part.segments) >= 2
    for sealed in part.segments[:-1]:
        assert allocated(sealed.log_path) < sealed.size_bytes + 64 * KIB, sealed.log_path
    part.close()


@pytest.mark.page_cache_only
async def test_a_reservation_left_by_a_crash_is_given_back_at_open(tmp_path):
    part = open_part(tmp_path, segment_size_bytes=3 * MIB)
    await append_all(part, [big_batch(i, 512 * KIB) for i in range(2)])
    log_path = part.segments[-1].log_path
    fd = os.open(log_path, os.O_RDWR)
    assert reserve_space(fd, os.path.getsize(log_path), 8 * MIB)  # past the segment size
    os.close(fd)
    assert has_blocks_past_end(log_path)
    # the process "died": no close; a new one opens the partition
    reopened = open_part(tmp_path, segment_size_bytes=3 * MIB)
    assert not has_blocks_past_end(log_path)
    assert reopened.read_offset(0, reopened.next_offset).to_bytes() == stored(part)
    reopened.close()


async def test_small_batches_and_reserve_ahead_zero_reserve_nothing(tmp_path):
    small = open_part(tmp_path / "small", inline_write_max_bytes=0)
    await append_all(small, [big_batch(i, 16 * KIB) for i in range(40)])
    off = open_part(tmp_path / "off", reserve_ahead=0)
    await append_all(off, [big_batch(i, 256 * KIB) for i in range(6)])
    for part in (small, off):
        log_path = part.segments[-1].log_path
        assert not has_blocks_past_end(log_path), log_path
        part.close()


@pytest.mark.page_cache_only
async def test_closing_with_a_write_in_flight_cuts_nothing(tmp_path):
    """A batch still in flight at close may be acknowledged when its write completes: the
    reservation is not given back then (the same-size truncate would cut its bytes)."""
    io = HeldIo()
    part = open_part(tmp_path, io)
    first = part.append_async(big_batch(1, 256 * KIB))
    io.complete(0)
    await first
    in_flight = part.append_async(big_batch(2, 256 * KIB))
    log_path = part.segments[-1].log_path
    written = os.path.getsize(log_path)  # HeldIo wrote the second batch already
    assert written > part.size_bytes
    part.close()
    io.complete(1)
    await in_flight
    assert os.path.getsize(log_path) == written
