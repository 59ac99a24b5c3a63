"""Asynchronous appends (``Partition.append_async``, ``core.log.appends``): acknowledged in
order, polls see written batches only, a failed write fails it and every later batch in
flight and leaves nothing behind, back-pressure, segment rollover, both real backends."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest
from log_helpers import HeldIo, ManualClock, RecordingIo

from lurcher.core.log.config import LogConfig
from lurcher.core.log.io import PosixIo, writeback_cut
from lurcher.core.log.partition import Partition
from lurcher.core.log.uring import _PairWrite, open_uring_io
from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def batch(tag: int, n: int = 3) -> MessageBatch:
    return MessageBatch.build([bytes([tag]) * 50 for _ in range(n)]).writable()


def open_part(tmp_path, io, **config) -> Partition:
    """A partition whose every write is asynchronous unless a test asks for inline ones
    (``inline_write_max_bytes``): this module is about the asynchronous pipeline."""
    config.setdefault("inline_write_max_bytes", 0)
    return Partition.open(str(tmp_path / "p"), 0, LogConfig(**config), io=io, clock=ManualClock())


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_acks_in_order_and_polls_see_written_batches_only(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io)
    futures = [part.append_async(batch(i)) for i in range(3)]
    io.complete(1)  # the second completes first: nothing is acknowledged or visible yet
    await settle()
    assert not any(f.done() for f in futures) and part.read_first(100).count == 0
    io.complete(0)
    await settle()
    assert [f.done() for f in futures] == [True, True, False]
    assert part.read_first(100).count == 6 and part.next_offset == 6
    io.complete(2)
    await asyncio.gather(*futures)
    assert part.read_first(100).count == 9
    part.close()


async def test_failed_write_fails_it_and_later_ones_and_leaves_nothing(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io)
    futures = [part.append_async(batch(i)) for i in range(4)]
    io.complete(0)
    io.complete(2)
    io.complete(1, OSError(errno.EIO, "injected"))
    later = part.append_async(batch(9))  # waits until the failed ones drained
    await settle()
    assert futures[0].result() is None
    for f in futures[1:3]:
        assert isinstance(f.exception(), IggyError)
        assert f.exception().code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert not futures[3].done() and not later.done() and len(io.submitted) == 4
    io.complete(3)  # written, but after a failed one: refused too, then the files are cut
    await settle()
    assert futures[3].exception().code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert len(io.submitted) == 5 and part.next_offset == 3
    io.complete(4)
    await later
    part.close()
    reopened = Partition.open(str(tmp_path / "p"), 0, LogConfig(), clock=ManualClock())
    polled = reopened.read_first(100).to_bytes()
    assert reopened.next_offset == 6 and polled.count(bytes([9]) * 50) == 3
    assert bytes([1]) * 50 not in polled and bytes([3]) * 50 not in polled
    reopened.close()


async def test_in_flight_batches_are_bounded(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io, max_inflight_batches=2)
    futures = [part.append_async(batch(i)) for i in range(5)]
    assert len(io.submitted) == 2
    for i in range(5):
        io.complete(i)
        await settle()
        assert len(io.submitted) == min(i + 3, 5)
    await asyncio.gather(*futures)
    assert part.next_offset == 15
    part.close()


async def test_rollover_waits_for_the_batches_in_flight(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io, segment_size_bytes=600)
    futures = [part.append_async(batch(i)) for i in range(3)]
    assert len(io.submitted) == 2 and part.segments_count == 1  # the 3rd needs a new segment
    io.complete(0)
    io.complete(1)
    await settle()
    assert len(io.submitted) == 3 and part.segments_count == 2
    io.complete(2)
    await asyncio.gather(*futures)
    assert [s.count for s in part.segments] == [6, 3]
    part.close()


async def test_purge_with_batches_in_flight(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io)
    first = part.append_async(batch(1))
    part.purge()
    io.complete(0)
    await first
    assert part.next_offset == 0
    second = part.append_async(batch(2))
    io.complete(1)
    await second
    assert part.next_offset == 3
    part.close()


async def test_a_batch_waiting_at_a_purge_is_answered_and_purged_with_the_rest(tmp_path):
    """A batch still waiting for its turn when the partition is purged came before the
    purge: it is answered (not refused) and gone with the rest, never stored after the purge
    (a replicated purge orders it so on every replica); the next send starts at offset 0."""
    io = HeldIo()
    part = open_part(tmp_path, io, max_inflight_batches=1)
    in_flight, waiting = part.append_async(batch(1)), part.append_async(batch(2))
    assert len(io.submitted) == 1
    part.purge()
    await settle()
    assert waiting.done() and waiting.exception() is None
    assert len(io.submitted) == 1 and part.next_offset == 0
    io.complete(0)
    await in_flight
    after = part.append_async(batch(3))
    io.complete(1)
    await after
    polled = part.read_first(100).to_bytes()
    assert part.next_offset == 3 and polled.count(bytes([3]) * 50) == 3
    assert bytes([1]) * 50 not in polled and bytes([2]) * 50 not in polled
    part.close()


@pytest.mark.parametrize("deleted, code", [(False, ErrorCode.CANNOT_WRITE_TO_FILE),
                                           (True, ErrorCode.PARTITION_NOT_FOUND)])
async def test_a_batch_waiting_at_a_close_is_refused(tmp_path, deleted, code):
    """Closed (the server stops): CANNOT_WRITE_TO_FILE; deleted: PARTITION_NOT_FOUND."""
    io = HeldIo()
    part = open_part(tmp_path, io, max_inflight_batches=1)
    in_flight, waiting = part.append_async(batch(1)), part.append_async(batch(2))
    part.close(deleted=deleted)
    assert waiting.exception().code == code
    io.complete(0)
    await in_flight
    assert len(io.submitted) == 1


@pytest.mark.parametrize("io", [pytest.param(PosixIo(), id="posix"),
                                pytest.param(open_uring_io(), id="uring")])
async def test_real_backends_write_concurrent_batches_in_order(tmp_path, io):
    part = open_part(tmp_path, io, segment_size_bytes=2000)
    await asyncio.gather(*(part.append_async(batch(i % 250, 5)) for i in range(40)))
    assert part.next_offset == 200 and part.segments_count > 1
    data = part.read_first(1000).to_bytes()
    part.close()
    reopened = Partition.open(str(tmp_path / "p"), 0, LogConfig(), clock=ManualClock())
    assert reopened.read_first(1000).to_bytes() == data
    assert reopened.next_offset == 200
    reopened.close()


@pytest.mark.parametrize("io", [pytest.param(PosixIo(), id="posix"),
                                pytest.param(open_uring_io(), id="uring")])
@pytest.mark.parametrize("blob,writeback", [(b"data", False), (b"d" * (1 << 20), True)],
                         ids=["small", "in-two-pieces"])
async def test_submit_pair_reports_a_failed_write_through_done(tmp_path, io, blob, writeback):
    path = tmp_path / "ro.log"
    path.write_bytes(b"")
    read_only = os.open(path, os.O_RDONLY)
    index_fd = io.open(str(tmp_path / "ro.index"))
    outcome = asyncio.get_running_loop().create_future()
    io.submit_pair(read_only, blob, 0, index_fd, b"e" * 16, 0, outcome.set_result, None,
                   writeback)
    error = await asyncio.wait_for(outcome, 10)
    assert isinstance(error, OSError) and error.errno == errno.EBADF
    assert io.size(index_fd) == 0  # the index entries (the commit record) were not written
    os.close(read_only)
    io.close(index_fd)


async def submit_and_wait(io, log_fd, blob, log_position, index_fd, entries, index_position,
                          reserve, writeback) -> list:
    """``submit_pair``, then every outcome its ``done`` reported (it must report once: a
    second call would come within the grace period)."""
    outcomes: list = []
    finished = asyncio.get_running_loop().create_future()

    def done(error):
        outcomes.append(error)
        finished.set_result(None)

    io.submit_pair(log_fd, blob, log_position, index_fd, entries, index_position, done,
                   reserve, writeback)
    await asyncio.wait_for(finished, 10)
    await asyncio.sleep(0.05)
    return outcomes


@pytest.mark.parametrize("io", [pytest.param(PosixIo(), id="posix"),
                                pytest.param(open_uring_io(), id="uring")])
@pytest.mark.parametrize("reserve,writeback", [(None, True), ((4096, 1 << 20), True),
                                               ((4096, 1 << 20), False)])
async def test_the_steps_after_a_pair_finish_before_done(tmp_path, io, reserve, writeback):
    """A reservation and the start of writeback run after the two writes, and ``done`` comes
    once, after all of them; when the write fails they are skipped and ``done`` still comes
    once, with the write's error."""
    log_fd, index_fd = io.open(str(tmp_path / "a.log")), io.open(str(tmp_path / "a.index"))
    outcomes = await submit_and_wait(io, log_fd, b"d" * 4096, 0, index_fd, b"e" * 16, 0,
                                     reserve, writeback)
    assert outcomes == [None]
    assert io.pread(log_fd, 8192, 0) == b"d" * 4096 and io.pread(index_fd, 64, 0) == b"e" * 16
    assert (os.fstat(log_fd).st_blocks * 512 >= (1 << 20)) == (reserve is not None)
    read_only = os.open(tmp_path / "a.log", os.O_RDONLY)
    failed = asyncio.get_running_loop().create_future()
    io.submit_pair(read_only, b"x", 0, index_fd, b"f" * 16, 16, failed.set_result, reserve,
                   writeback)
    assert (await asyncio.wait_for(failed, 10)).errno == errno.EBADF
    assert io.size(index_fd) == 16
    for fd in (log_fd, index_fd):
        io.close(fd)
    os.close(read_only)


@pytest.mark.parametrize("io", [pytest.param(PosixIo(), id="posix"),
                                pytest.param(open_uring_io(), id="uring")])
@pytest.mark.parametrize("position", [0, 100])
async def test_a_big_log_write_with_writeback_lands_whole_from_its_two_pieces(
        tmp_path, io, position):
    """With ``writeback`` a log write long enough is cut in two at a page of the file
    (``writeback_cut``); every byte still lands where it belongs, and ``done`` comes once."""
    blob = os.urandom(1 << 20)
    assert writeback_cut(position, len(blob)) % 4096 == (-position) % 4096
    log_fd, index_fd = io.open(str(tmp_path / "a.log")), io.open(str(tmp_path / "a.index"))
    outcomes = await submit_and_wait(io, log_fd, blob, position, index_fd, b"e" * 16, 0,
                                     None, True)
    assert outcomes == [None]
    assert io.pread(log_fd, len(blob) + 8192, position) == blob
    assert io.pread(index_fd, 64, 0) == b"e" * 16
    for fd in (log_fd, index_fd):
        io.close(fd)


def test_a_short_piece_and_the_pieces_it_cancelled_are_finished_in_order(tmp_path):
    """A short write breaks the chain: the kernel cancels every later step (ECANCELED, it
    wrote nothing); ``finish`` writes the short piece's rest and then each cancelled piece
    whole."""
    first, second, entries = b"a" * 8192, b"b" * 8192, b"e" * 16
    log_fd = os.open(tmp_path / "a.log", os.O_RDWR | os.O_CREAT)
    index_fd = os.open(tmp_path / "a.index", os.O_RDWR | os.O_CREAT)
    os.pwrite(log_fd, first[:1000], 0)  # what the short write wrote
    pieces = [(log_fd, first, 0, 0), (log_fd, second, 8192, 2), (index_fd, entries, 0, 3)]
    write = _PairWrite(pieces, lambda error: None, 6)
    write.results = [1000] + [-errno.ECANCELED] * 5
    assert write.finish() is None
    assert os.pread(log_fd, 1 << 16, 0) == first + second
    assert os.pread(index_fd, 64, 0) == entries
    os.close(log_fd)
    os.close(index_fd)


async def test_with_enforce_fsync_a_submission_starts_the_writeback_of_both_files(
        tmp_path, segment_writes):
    """Of both page-cache files; a direct write leaves no dirty page, so none then."""
    per_batch = 2 if segment_writes == "page-cache" else 0
    for enforce_fsync, expected in ((True, per_batch), (False, 0)):
        io = RecordingIo()
        part = open_part(tmp_path / str(enforce_fsync), io, enforce_fsync=enforce_fsync,
                         group_commit=True)
        await part.append_async(batch(1, 200))
        assert io.calls.get("start_writeback", 0) == expected
        part.close()


class RefusingIo(HeldIo):
    """Refuses the second submission outright (as a ring that cannot be set up would)."""

    def submit_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, done,
                    reserve=None, writeback=False):
        if len(self.submitted) == 1 and not getattr(self, "refused", False):
            self.refused = True
            raise OSError(errno.ENOMEM, "no ring")
        super().submit_pair(log_fd, blob, log_position, index_fd, entries, index_position, done)


async def test_a_refused_submission_fails_like_a_failed_write(tmp_path):
    io = RefusingIo()
    part = open_part(tmp_path, io)
    first = part.append_async(batch(1))
    refused = part.append_async(batch(2))
    behind = part.append_async(batch(3))  # stamped after the refused one: fails with it
    io.complete(0)
    await first
    io.complete(1)
    for future in (refused, behind):
        with pytest.raises(IggyError):
            await future
    fourth = part.append_async(batch(4))
    io.complete(2)
    await fourth
    assert part.next_offset == 6
    polled = part.read_first(100).to_bytes()
    assert bytes([2]) * 50 not in polled and bytes([3]) * 50 not in polled
    part.close()


class DeferredIo(PosixIo):
    """Keeps submitted pairs unwritten; the test writes (parts of) them in any order and
    then 'crashes' (reopens the directory without completing anything)."""

    def __init__(self) -> None:
        self.pairs: list[tuple] = []

    def submit_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, done,
                    reserve=None, writeback=False):
        self.pairs.append((log_fd, bytes(blob), log_position, index_fd, bytes(entries),
                           index_position))

    def land(self, i: int, log_bytes: int | None = None, index: bool = True) -> None:
        log_fd, blob, log_position, index_fd, entries, index_position = self.pairs[i]
        self.pwrite(log_fd, blob[:log_bytes], log_position)
        if index:
            self.pwrite(index_fd, entries, index_position)


@pytest.mark.page_cache_only  # O_DIRECT pairs land in order (IOSQE_IO_DRAIN), and a later
# pair's window carries the earlier batch's bytes of the block they share
@pytest.mark.parametrize("landed", [
    "later batch whole, earlier one absent",
    "later batch whole, earlier one's log only",
    "later batch whole, earlier one's log torn",
])
async def test_out_of_order_writes_in_flight_at_a_crash_leave_whole_batches(tmp_path, landed):
    """io_uring may run the writes of batches in flight in any order; a kill then leaves a
    later batch written around an earlier, missing or torn one. Recovery keeps whole
    batches up to the first missing byte only (whole unacknowledged ones may stay)."""
    io = DeferredIo()
    part = open_part(tmp_path, io)
    part.append(batch(1, 4))  # written and acknowledged before the crash
    for tag in (2, 3):
        part.append_async(batch(tag, 4))
    io.land(1)
    if landed.endswith("log only"):
        io.land(0, index=False)
    elif landed.endswith("log torn"):
        io.land(0, log_bytes=len(io.pairs[0][1]) // 2, index=False)
    reopened = Partition.open(str(tmp_path / "p"), 0, LogConfig(), clock=ManualClock())
    polled = reopened.read_first(100).to_bytes()
    assert reopened.next_offset in (4, 8, 12)  # whole batches (unacknowledged ones may stay)
    assert polled.count(bytes([1]) * 50) == 4
    if not landed.endswith("log only"):  # never past a missing or torn earlier batch
        assert reopened.next_offset == 4 and bytes([3]) * 50 not in polled
    reopened.close()


async def test_after_a_failed_write_the_next_batch_is_stamped_after_the_kept_ones(tmp_path):
    """A replica whose write failed stamps the same batch again like the replicas that
    never wrote it: with its own time, not one after the failed batch's."""
    io = HeldIo()
    part = open_part(tmp_path, io)
    first, failed = batch(0), batch(1)
    first.stamp_us, failed.stamp_us = 100, 200
    futures = [part.append_async(first), part.append_async(failed)]
    io.complete(0)
    io.complete(1, OSError(errno.EIO, "injected"))
    await settle()
    assert futures[0].result() is None and futures[1].exception() is not None
    again = batch(1)
    again.stamp_us = 200
    written = part.append_async(again)
    io.complete(2)
    await written
    assert part.read_first(100).to_bytes() and part.segments[-1].last_timestamp == 200
    part.close()


class _SubmitFailsOnce:
    """liburing whose ``io_uring_submit`` fails the first ``failures`` times without entering
    the kernel (what a failed enter leaves: the queued entries stay queued)."""

    def __init__(self, lib, failures: int = 1, space: int | None = None) -> None:
        self._lib, self.failures, self.space = lib, failures, space

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def io_uring_submit(self, ring):
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EBUSY, "Device or resource busy")
        return self._lib.io_uring_submit(ring)

    def io_uring_sq_space_left(self, ring):
        return self._lib.io_uring_sq_space_left(ring) if self.space is None else self.space


def _ring(lib):
    from lurcher.core.log.uring import CompletionRing
    return CompletionRing(lib, asyncio.get_running_loop())


@pytest.mark.page_cache_only  # the ring itself, no segment files
async def test_a_failed_io_uring_submit_completes_the_pair_later(tmp_path):
    """The entries a failed submit leaves queued are submitted again: the pair completes
    once, written, instead of failing while its writes may still run later."""
    import liburing
    ring = _ring(_SubmitFailsOnce(liburing, failures=2))
    io = PosixIo()
    log_fd, index_fd = io.open(str(tmp_path / "a.log")), io.open(str(tmp_path / "a.index"))
    outcome = asyncio.get_running_loop().create_future()
    ring.submit_pair(log_fd, b"x" * 100, 0, index_fd, b"e" * 16, 0, outcome.set_result)
    assert await asyncio.wait_for(outcome, 5) is None
    assert os.pread(log_fd, 200, 0) == b"x" * 100 and os.pread(index_fd, 20, 0) == b"e" * 16
    ring.close()
    io.close(log_fd)
    io.close(index_fd)


@pytest.mark.page_cache_only
async def test_a_full_submission_queue_refuses_a_pair_with_nothing_queued(tmp_path):
    import liburing
    lib = _SubmitFailsOnce(liburing, failures=1, space=1)  # no room for a pair's two writes
    ring = _ring(lib)
    io = PosixIo()
    log_fd, index_fd = io.open(str(tmp_path / "a.log")), io.open(str(tmp_path / "a.index"))
    with pytest.raises(OSError) as refused:
        ring.submit_pair(log_fd, b"x" * 100, 0, index_fd, b"e" * 16, 0, lambda error: None)
    assert refused.value.errno == errno.EBUSY
    assert liburing.io_uring_sq_ready(ring._ring) == 0  # nothing left to run later
    ring.close()
    io.close(log_fd)
    io.close(index_fd)


class _RecordingRingLib:
    """liburing that records each prepared step of a chain (name and its sizes), then
    prepares it for real."""

    def __init__(self, lib) -> None:
        self._lib, self.steps = lib, []

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def io_uring_prep_write(self, sqe, fd, view, length, position):
        self.steps.append(("write", fd, length, position))
        return self._lib.io_uring_prep_write(sqe, fd, view, length, position)

    def io_uring_prep_sync_file_range(self, sqe, fd, length, position, flags):
        self.steps.append(("writeback", fd, length, position))
        return self._lib.io_uring_prep_sync_file_range(sqe, fd, length, position, flags)


@pytest.mark.page_cache_only
@pytest.mark.parametrize("size,pieces", [(1 << 20, 2), ((1 << 19) - 1, 1)])
async def test_a_long_write_with_writeback_is_queued_in_two_pieces(tmp_path, size, pieces):
    """At 512 KiB or more, the log write is two write steps with the first piece's writeback
    between them; below, one write; both followed by the index write and the writeback of
    both files."""
    import liburing
    lib = _RecordingRingLib(liburing)
    ring = _ring(lib)
    io = PosixIo()
    log_fd, index_fd = io.open(str(tmp_path / "a.log")), io.open(str(tmp_path / "a.index"))
    blob = os.urandom(size)
    outcome = asyncio.get_running_loop().create_future()
    ring.submit_pair(log_fd, blob, 100, index_fd, b"e" * 16, 0, outcome.set_result, None, True)
    assert await asyncio.wait_for(outcome, 5) is None
    cut = writeback_cut(100, size)
    log_steps = ([("write", log_fd, cut, 100), ("writeback", log_fd, cut, 100),
                  ("write", log_fd, size - cut, 100 + cut)] if pieces == 2
                 else [("write", log_fd, size, 100)])
    assert lib.steps == log_steps + [("write", index_fd, 16, 0), ("writeback", log_fd, 0, 0),
                                     ("writeback", index_fd, 0, 0)]
    assert os.pread(log_fd, size + 100, 100) == blob
    ring.close()
    io.close(log_fd)
    io.close(index_fd)


class SecondDirSyncFailsIo(HeldIo):
    """``HeldIo`` whose second directory fsync (a purge's first after its renames, with
    ``enforce_fsync``) waits for ``release`` and then fails with EIO."""

    def __init__(self) -> None:
        super().__init__()
        self.dir_syncs = 0
        self.entered, self.release = threading.Event(), threading.Event()

    def sync_directory(self, path: str) -> None:
        self.dir_syncs += 1
        if self.dir_syncs == 2:
            self.entered.set()
            self.release.wait(10)
            raise OSError(errno.EIO, "injected")
        super().sync_directory(path)


async def test_a_send_held_by_a_purge_that_cannot_finish_on_disk_is_refused(tmp_path):
    """A batch sent while a purge fsyncs the directories after its renames (off the event
    loop) waits for them; they fail, so the partition refuses it as every later send
    (a restart finishes the purge, which would drop it)."""
    io = SecondDirSyncFailsIo()
    part = open_part(tmp_path, io, enforce_fsync=True)
    purge = asyncio.ensure_future(part.purge_async())
    assert await asyncio.get_running_loop().run_in_executor(None, io.entered.wait, 10)
    held = part.append_async(batch(1))
    await settle()
    assert not held.done() and not io.submitted
    io.release.set()
    await purge
    with pytest.raises(IggyError) as refused:
        await held
    assert refused.value.code == ErrorCode.CANNOT_WRITE_TO_FILE and not io.submitted
    assert part.next_offset == 0 and os.path.exists(os.path.join(part.path, "purging"))
    part.close()
