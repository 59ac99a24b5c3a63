"""Failures around batches in flight: a partition closed with writes in flight, a failed
fsync after a purge or outside group commit, a purge on a full disk, a file handle dropped on
a worker thread, a submission that raises a bug. Nothing acknowledged is lost, nothing
answered as failed stays, and the partition keeps serving."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest
from log_helpers import HeldIo, ManualClock, batch

from lurcher.core.log import LogConfig, Partition, PosixIo
from lurcher.core.log.faulty_io import FaultyIo
from lurcher.core.log.files import DescriptorCache
from lurcher.core.shard.commit import GroupCommit
from lurcher.core.wire.errors import IggyError

ASYNC = LogConfig(inline_write_max_bytes=0)
GROUP = LogConfig(enforce_fsync=True, group_commit=True, inline_write_max_bytes=0)


def _eio() -> OSError:
    return OSError(errno.EIO, "Input/output error")


class _FirstLost(HeldIo):
    """The first submitted pair never reaches the file (the device failed it); later
    pairs are written; completions come when the test says."""

    def submit_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, done,
                    reserve=None, writeback=False):
        if self.submitted:
            self.append_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                             False)
        self.submitted.append(done)


@pytest.mark.page_cache_only  # O_DIRECT rewrites the shared tail block with the next batch
async def test_a_batch_after_a_failed_one_fails_when_the_partition_closes_meanwhile(part_dir):
    io = _FirstLost()
    part = Partition.open(part_dir, 1, ASYNC, io=io, clock=ManualClock())
    part.append(batch(2, tag=1))  # offsets 0-1
    first = part.append_async(batch(2, tag=10))  # 2-3: its write will fail
    second = part.append_async(batch(2, tag=20))  # 4-5: written
    part.close()  # shutdown with both in flight
    io.complete(1)
    await asyncio.sleep(0)
    assert not second.done()  # it waits for the batch before it, orphaned or not
    io.complete(0, _eio())
    await asyncio.sleep(0)
    assert isinstance(first.exception(), IggyError)
    assert isinstance(second.exception(), IggyError)  # acknowledged, it would be lost below
    reopened = Partition.open(part_dir, 1, ASYNC, clock=ManualClock())
    assert reopened.next_offset == 2  # recovery stops at the hole the failed batch left
    reopened.close()


async def test_orphans_written_in_order_are_all_acknowledged(part_dir):
    io = HeldIo()
    part = Partition.open(part_dir, 1, ASYNC, io=io, clock=ManualClock())
    futures = [part.append_async(batch(1, tag=i)) for i in range(3)]
    part.close()
    for i in (2, 0, 1):
        io.complete(i)
    await asyncio.sleep(0)
    assert [f.exception() for f in futures] == [None, None, None]
    reopened = Partition.open(part_dir, 1, ASYNC, clock=ManualClock())
    assert reopened.next_offset == 3
    reopened.close()


def test_a_failed_fsync_after_a_purge_cuts_what_was_written_since(part_dir):
    part = Partition.open(part_dir, 1, GROUP, clock=ManualClock())
    for i in range(10):
        part.append(batch(1, tag=i))
    part.synced_to(part.next_offset, part.epoch)  # a round covered offsets 0-9
    part.purge()
    for i in range(3):
        part.append(batch(1, tag=100 + i))  # waiting for the next round
    part.fail_storage(_eio())  # that round's fsync failed: the 3 sends are answered failed
    assert part.next_offset == 0
    part.close()
    reopened = Partition.open(part_dir, 1, GROUP, clock=ManualClock())
    assert reopened.next_offset == 0
    reopened.close()


def test_a_round_begun_before_a_purge_vouches_for_nothing_after_it(part_dir):
    part = Partition.open(part_dir, 1, GROUP, clock=ManualClock())
    for i in range(5):
        part.append(batch(1, tag=i))
    point = (part.next_offset, part.epoch)  # a round starts here
    part.purge()
    part.append(batch(1, tag=50))
    part.synced_to(*point)  # the round ends well
    assert part.synced_next_offset == 0
    part.fail_storage(_eio())
    assert part.next_offset == 0
    part.close()


def test_a_failed_fsync_below_the_first_kept_segment_empties_the_partition(part_dir):
    config = LogConfig(enforce_fsync=True, group_commit=True, segment_size_bytes=300)
    part = Partition.open(part_dir, 1, config, clock=ManualClock())
    part.append(batch(2))
    part.synced_to(2, part.epoch)  # 0-1 on the device
    part.append(batch(4))  # 2-5, not synced
    part.append(batch(2))  # a new segment from 6
    assert len(part.segments) == 2
    assert part.delete_oldest_segments(1)[0] == 1  # a client's DeleteSegments
    part.fail_storage(_eio())
    assert part.messages_count == 0 and part.next_offset == 6  # 6-7 were never synced
    part.close()


def test_only_the_first_failed_fsync_counts(part_dir):
    """A later failure (a late round's, a seal's) neither replaces the reason sends are
    refused with nor cuts again."""
    part = Partition.open(part_dir, 1, GROUP, clock=ManualClock())
    part.append(batch(2))
    part.synced_to(2, part.epoch)
    part.append(batch(2))  # 2-3, not synced
    part.fail_storage(OSError(errno.EIO, "first"))
    assert part.next_offset == 2
    part.synced_to(4, part.epoch)  # a round that began before the failure ends well
    part.fail_storage(OSError(errno.EIO, "second"))
    assert "first" in part.storage_failure and part.next_offset == 2
    with pytest.raises(IggyError, match="first"):
        part.append(batch(1))
    part.close()


async def test_a_failed_flush_fsync_fails_the_partition_and_no_send_is_durable(part_dir):
    io = FaultyIo(PosixIo(), "fsync-eio", 1)  # the first fsync fails
    part = Partition.open(part_dir, 1, LogConfig(enforce_fsync=True, group_commit=True),
                          io=io, clock=ManualClock())
    commit = GroupCommit()
    commit.running = True  # a round is running: the send's waiter queues for the next
    written = part.append_async(batch(3))  # inline through the page cache, else a future
    if written is not None:
        await written
    durable = commit.durable(part)
    with pytest.raises(OSError):
        part.flush(fsync=True)  # a client's FlushUnsavedBuffer(fsync)
    assert part.storage_failure is not None
    commit.running = False
    commit._start_round()  # the next round: its fsync would succeed (errseq reported once)
    with pytest.raises(IggyError):
        await asyncio.wait_for(durable, 5)
    assert part.next_offset == 0


def test_a_failed_flush_fsync_without_enforce_fsync_only_reports(part_dir):
    io = FaultyIo(PosixIo(), "fsync-eio", 1)
    part = Partition.open(part_dir, 1, LogConfig(), io=io, clock=ManualClock())
    part.append(batch(3))
    with pytest.raises(OSError):
        part.flush(fsync=True)
    assert part.storage_failure is None and part.next_offset == 3  # nothing promised more
    part.flush(fsync=True)  # still dirty: fsynced again
    part.close()


def test_handles_that_cannot_all_be_had_leave_every_segment_dirty(part_dir):
    config = LogConfig(segment_size_bytes=200)  # (enforce_fsync syncs a segment it seals)
    part = Partition.open(part_dir, 1, config, clock=ManualClock())
    part.append(batch(4))
    part.append(batch(4))  # a second segment
    assert [s.dirty for s in part.segments] == [True, True]
    plain_get = part.files.get

    def no_descriptor_for_the_second(path, create=False):
        if path == part.segments[1].log_path:
            raise OSError(errno.EMFILE, "Too many open files")
        return plain_get(path, create)

    part.files.get = no_descriptor_for_the_second
    with pytest.raises(OSError):
        part.take_unsynced()
    assert [s.dirty for s in part.segments] == [True, True]
    part.files.get = plain_get
    assert len(part.take_unsynced()) == 4
    part.close()


class _FullDiskOnCreate(PosixIo):
    full = False

    def open(self, path, create=True, mode=0o644):
        if self.full and create:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().open(path, create, mode)


def test_a_purge_on_a_full_disk_leaves_a_partition_that_serves(part_dir):
    io = _FullDiskOnCreate()
    part = Partition.open(part_dir, 1, LogConfig(), io=io, clock=ManualClock())
    part.append(batch(2))
    io.full = True
    part.purge()
    assert part.read_first(10).count == 0 and part.first_offset == 0
    with pytest.raises(IggyError):
        part.append(batch(1))  # still no room for the new files
    io.full = False
    part.append(batch(1, tag=7))  # space came back: the first send creates them
    assert part.next_offset == 1 and part.read_first(10).count == 1
    part.close()
    reopened = Partition.open(part_dir, 1, LogConfig(), clock=ManualClock())
    assert reopened.next_offset == 1
    reopened.close()


async def test_a_handle_dropped_on_another_thread_is_closed_on_its_loop(tmp_path):
    closed_on: list[str] = []

    class Recording(PosixIo):
        def close(self, fd):
            closed_on.append(threading.current_thread().name)
            super().close(fd)

    files = DescriptorCache(Recording())
    path = str(tmp_path / "f")
    handle = files.get(path, create=True)
    files.forget(path)
    holder = [handle]
    del handle
    worker = threading.Thread(target=holder.clear, name="worker")
    worker.start()
    worker.join()
    assert closed_on == []  # not on the worker: handed to the loop
    await asyncio.sleep(0)
    assert closed_on == [threading.current_thread().name]


async def test_a_submission_that_raises_a_bug_fails_its_batch_and_the_next_goes_on(part_dir):
    class Broken(PosixIo):
        broken = True

        def submit_pair(self, *args, **kwargs):
            if self.broken:
                self.broken = False
                raise TypeError("a bug in a backend")
            super().submit_pair(*args, **kwargs)

    part = Partition.open(part_dir, 1, ASYNC, io=Broken(), clock=ManualClock())
    with pytest.raises(IggyError):
        await part.append_async(batch(2))
    assert not part.pipeline.inflight
    await asyncio.wait_for(part.append_async(batch(2, tag=9)), 5)
    assert part.next_offset == 2
    part.close()


def test_with_enforce_fsync_a_segment_is_synced_before_the_next_one_exists(part_dir):
    """Recovery trusts a sealed segment's whole records; after a power loss a segment
    sealed before its last batch reached the device would keep part of that batch."""
    events: list[tuple[str, str]] = []

    class Recording(PosixIo):
        def open(self, path, create=True, mode=0o644):
            fd = super().open(path, create, mode)
            self.paths = getattr(self, "paths", {})
            self.paths[fd] = path
            if create and path.endswith(".log"):
                events.append(("create", path.rsplit("/", 1)[-1]))
            return fd

        def fsync(self, fd):
            events.append(("fsync", self.paths[fd].rsplit("/", 1)[-1]))
            super().fsync(fd)

    config = LogConfig(enforce_fsync=True, group_commit=True, segment_size_bytes=200)
    part = Partition.open(part_dir, 1, config, io=Recording(), clock=ManualClock())
    part.append(batch(4))  # not synced: its group-commit round has not run
    events.clear()
    part.append(batch(4))  # rotation
    sealed, created = "00000000000000000000", ("create", "00000000000000000004.log")
    assert events.index(("fsync", sealed + ".log")) < events.index(created)
    assert events.index(("fsync", sealed + ".index")) < events.index(created)
    assert not part.segments[0].dirty
    part.close()
