"""O_DIRECT segment files (``core.log.direct``): the aligned window of every tail case, the
buffer pool, and a partition written through ``DirectIo`` over both real backends (appends,
asynchronous appends, a failed write cut back, a padded tail left by a crash)."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest
from log_helpers import ManualClock, RecordingIo, batch, messages

from lurcher.core.log.config import LogConfig
from lurcher.core.log.direct import BLOCK, AlignedPool, DirectIo, is_segment_file, lay_out
from lurcher.core.log.io import PosixIo
from lurcher.core.log.partition import Partition
from lurcher.core.log.uring import open_uring_io

INNER = [pytest.param(PosixIo, id="posix"), pytest.param(open_uring_io, id="uring")]


def window(end: int, tail: bytes, position: int, data: bytes):
    buffer = bytearray(b"\xee" * (4 * BLOCK))  # stale bytes, as in a reused buffer
    start, length, new_end, new_tail = lay_out(buffer, end, tail, position, data)
    return bytes(buffer[:length]), start, new_end, new_tail


def test_empty_file():
    out, start, end, tail = window(0, b"", 0, b"abc")
    assert (start, end, tail) == (0, 3, b"abc")
    assert out == b"abc" + bytes(BLOCK - 3)


def test_exact_block_leaves_no_tail():
    out, start, end, tail = window(0, b"", 0, b"x" * BLOCK)
    assert (start, len(out), end, tail) == (0, BLOCK, BLOCK, b"")
    out, start, end, tail = window(BLOCK, b"", BLOCK, b"y")
    assert (start, end, tail) == (BLOCK, BLOCK + 1, b"y") and out[:2] == b"y\0"


def test_partial_tail_is_rewritten_in_front_of_the_new_bytes():
    out, start, end, tail = window(BLOCK + 10, b"t" * 10, BLOCK + 10, b"n" * 5)
    assert (start, end, tail) == (BLOCK, BLOCK + 15, b"t" * 10 + b"n" * 5)
    assert out == b"t" * 10 + b"n" * 5 + bytes(BLOCK - 15)


def test_write_straddling_blocks():
    data = bytes(range(256)) * 20  # 5120 bytes
    out, start, end, tail = window(BLOCK + 100, b"t" * 100, BLOCK + 100, data)
    assert start == BLOCK and len(out) == 2 * BLOCK and end == BLOCK + 100 + len(data)
    assert out[:100] == b"t" * 100 and out[100:100 + len(data)] == data
    assert out[100 + len(data):] == bytes(2 * BLOCK - 100 - len(data))
    assert tail == data[-(end - 2 * BLOCK):]


def test_write_past_the_end_fills_the_gap_with_zeros():
    out, start, end, tail = window(5, b"abcde", 8, b"z")
    assert (start, end) == (0, 9) and out[:9] == b"abcde\0\0\0z"


def test_overwrite_inside_the_tail_keeps_the_bytes_after_it():
    out, _, end, tail = window(6, b"abcdef", 2, b"XY")
    assert end == 6 and tail == b"abXYef" and out[:6] == b"abXYef"


def test_pool_reuses_buffers_by_size_class():
    pool = AlignedPool()
    first = pool.acquire(5000)
    assert len(first) == 2 * BLOCK
    pool.release(first)
    assert pool.acquire(6000) is first and pool.allocated == 1
    assert len(pool.acquire(1)) == BLOCK


def test_only_segment_files_are_direct():
    assert is_segment_file("/d/00000000000000000042.log")
    assert is_segment_file("00000000000000000000.index")
    assert not is_segment_file("/d/state/log") and not is_segment_file("/d/offsets.log")


def open_part(path: str, io, **config) -> Partition:
    return Partition.open(path, 0, LogConfig(**config), io=io, clock=ManualClock())


@pytest.mark.parametrize("inner", INNER)
@pytest.mark.parametrize("fsync", [False, True])
def test_partition_through_direct_io_reads_back_and_reopens(tmp_path, inner, fsync):
    io = DirectIo(inner())
    path = str(tmp_path / "p")
    part = open_part(path, io, segment_size_bytes=20_000, enforce_fsync=fsync)
    for i in range(30):
        part.append(batch(1 + i % 7, tag=i, size=1 + 97 * i % 500))
    assert io.pool.allocated <= 4 and part.segments_count > 1
    data = part.read_first(10_000).to_bytes()
    assert [m[2] for m in messages(data)] == [bytes([(i + j) % 256]) * (1 + 97 * i % 500)
                                               for i in range(30) for j in range(1 + i % 7)]
    part.close()
    reopened = open_part(path, PosixIo())
    assert reopened.read_first(10_000).to_bytes() == data
    assert not any(r.changed for r in reopened.recovery.values())
    reopened.close()


@pytest.mark.parametrize("inner", INNER)
async def test_asynchronous_appends_in_flight_land_in_order(tmp_path, inner):
    io = DirectIo(inner())
    path = str(tmp_path / "p")
    part = open_part(path, io, segment_size_bytes=50_000)
    await asyncio.gather(*(part.append_async(batch(3, tag=i, size=333)) for i in range(60)))
    data = part.read_first(1000).to_bytes()
    assert part.next_offset == 180
    part.close()
    reopened = open_part(path, PosixIo())
    assert reopened.read_first(1000).to_bytes() == data and reopened.next_offset == 180
    reopened.close()


def test_padding_left_by_a_crash_is_cut_at_restart(tmp_path):
    """A kill leaves the files padded to a block: reopening finds the real end."""
    io = DirectIo(PosixIo())
    path = str(tmp_path / "p")
    part = open_part(path, io)
    part.append(batch(3, size=10))
    part.append(batch(2, size=1000))
    data = part.read_first(100).to_bytes()
    log_file = part.segments[-1].log_path
    assert os.path.getsize(log_file) % BLOCK == 0 and os.path.getsize(log_file) > len(data)
    reopened = open_part(path, DirectIo(PosixIo()))  # without closing: as after a kill
    assert reopened.read_first(100).to_bytes() == data
    assert os.path.getsize(log_file) == len(data)
    assert os.path.getsize(reopened.segments[-1].index_path) == 5 * 16
    reopened.append(batch(1, size=5))
    assert reopened.next_offset == 6
    reopened.close()
    part.close()


def test_torn_tail_at_restart_is_cut_and_appends_go_on_after_it(tmp_path):
    path = str(tmp_path / "p")
    part = open_part(path, DirectIo(PosixIo()))
    part.append(batch(4, size=100))
    kept = part.read_first(100).to_bytes()
    part.close()
    log_file = os.path.join(path, "00000000000000000000.log")
    with open(log_file, "r+b") as f:  # a torn, unindexed batch after the kept one
        f.seek(len(kept))
        f.write(kept[:150])
    reopened = open_part(path, DirectIo(PosixIo()))
    assert reopened.next_offset == 4 and os.path.getsize(log_file) == len(kept)
    reopened.append(batch(2, tag=9, size=100))
    assert reopened.read_first(100).to_bytes()[:len(kept)] == kept
    reopened.close()
    again = open_part(path, PosixIo())
    assert again.next_offset == 6 and not any(r.changed for r in again.recovery.values())
    again.close()


class FailOnce(PosixIo):
    """Fails the next ``append_pair`` after writing its log bytes (a failing device)."""

    fail = False

    def append_pair(self, log_fd, blob, log_position, index_fd, entries, index_position,
                    fsync):
        if self.fail:
            self.fail = False
            self.pwrite(log_fd, blob, log_position)
            raise OSError(5, "Input/output error")
        super().append_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                            fsync)


def test_failed_write_is_cut_back_and_the_tail_reset(tmp_path):
    inner = FailOnce()
    path = str(tmp_path / "p")
    part = open_part(path, DirectIo(inner))
    part.append(batch(3, size=100))
    kept = part.read_first(100).to_bytes()
    inner.fail = True
    with pytest.raises(Exception, match="Input/output error"):
        part.append(batch(5, tag=50, size=700))
    part.append(batch(2, tag=90, size=10))
    data = part.read_first(100).to_bytes()
    assert part.next_offset == 5 and data[:len(kept)] == kept
    part.close()
    reopened = open_part(path, PosixIo())
    assert reopened.read_first(100).to_bytes() == data
    assert not any(r.changed for r in reopened.recovery.values())
    reopened.close()


def test_file_system_without_o_direct_falls_back_with_one_log_line(tmp_path, monkeypatch,
                                                                   caplog):
    """Where opening with O_DIRECT fails with EINVAL (tmpfs on older kernels, some network
    file systems), segment files are written through the page cache; one warning says so."""
    plain_open = os.open

    def no_direct(path, flags, mode=0o777):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return plain_open(path, flags, mode)

    monkeypatch.setattr(os, "open", no_direct)
    io = DirectIo(PosixIo())
    path = str(tmp_path / "p")
    with caplog.at_level("WARNING", logger="lurcher.core.log.direct"):
        part = open_part(path, io, segment_size_bytes=1500)
        for i in range(5):
            part.append(batch(4, tag=i, size=100))
    assert part.segments_count > 1 and not io.enabled
    warnings = [r for r in caplog.records if "O_DIRECT" in r.getMessage()]
    assert len(warnings) == 1
    data = part.read_first(100).to_bytes()
    part.close()
    reopened = open_part(path, PosixIo())
    assert reopened.read_first(100).to_bytes() == data and reopened.next_offset == 20
    reopened.close()


def test_a_file_opened_twice_shares_its_tail_and_end(tmp_path):
    """The descriptor cache may reopen a segment file while a write through the old
    descriptor is in flight: both descriptors continue one logical file."""
    io = DirectIo(PosixIo())
    path = str(tmp_path / "00000000000000000000.log")
    first = io.open(path)
    io.pwrite(first, b"a" * 100, 0)
    second = io.open(path)
    assert io.size(second) == 100  # not the padded size on disk
    io.pwrite(second, b"b" * 50, 100)
    io.close(first)
    assert io.size(second) == 150 and io.pread(second, 150, 0) == b"a" * 100 + b"b" * 50
    io.close(second)
    with open(path, "rb") as f:
        assert f.read() == b"a" * 100 + b"b" * 50


async def test_with_enforce_fsync_direct_files_start_no_writeback(tmp_path):
    """A direct write leaves no dirty page: the submission asks for no writeback (a page
    cache file gets two, one per file: ``test_async_append``); the group commit's fsync
    still covers the batch, which reads back after a reopen."""
    io = DirectIo(RecordingIo())
    path = str(tmp_path / "p")
    part = open_part(path, io, enforce_fsync=True, group_commit=True)
    await part.append_async(batch(3, size=700))
    for handle in part.take_unsynced():  # what a group-commit round starts before its fsync
        io.start_writeback(handle.fd)
    assert io.enabled, "O_DIRECT is refused under the test's temporary directory"
    assert io.calls.get("start_writeback", 0) == 0
    data = part.read_first(10).to_bytes()
    part.close()
    reopened = open_part(path, PosixIo())
    assert reopened.read_first(10).to_bytes() == data and reopened.next_offset == 3
    reopened.close()
