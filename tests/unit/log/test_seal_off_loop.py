"""With ``enforce_fsync`` a full segment is fsynced before its successor exists; on the send
path (``append_async``) that fsync runs on the process's fsync thread, not on the event loop,
never beside a group-commit round's fsyncs, and the batch that rolls the segment over waits
for it. A failed seal fsync fails that batch with CANNOT_WRITE_TO_FILE and keeps everything
fsynced before it; one that fails after the partition was closed changes nothing."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest
from log_helpers import ManualClock, batch, messages, read_file

from lurcher.core.log import LogConfig, Partition, PosixIo
from lurcher.core.log.faulty_io import FaultyIo
from lurcher.core.shard.commit import GroupCommit
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

FIRST, SECOND, THIRD = "00000000000000000000", "00000000000000000004", "00000000000000000008"
FSYNC_THREAD_NAME = "lurcher-fsync"


class _Recording(PosixIo):
    """Records file creations and fsyncs (with the thread each fsync ran on), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str, str]] = []
        self.paths: dict[int, str] = {}

    def open(self, path, create=True, mode=0o644):
        fd = super().open(path, create, mode)
        self.paths[fd] = path.rsplit("/", 1)[-1]
        if create:
            self.events.append(("create", self.paths[fd], threading.current_thread().name))
        return fd

    def fsync(self, fd):
        self.events.append(("fsync", self.paths[fd], threading.current_thread().name))
        super().fsync(fd)

    def fsync_in_worker(self, fd):
        self.fsync(fd)


def _synced_before_created(events: list, sealed: str, successor: str) -> None:
    """Both files of segment ``sealed`` were fsynced before ``successor``'s log existed."""
    created = [i for i, (kind, name, _) in enumerate(events)
               if kind == "create" and name == successor + ".log"]
    for suffix in (".log", ".index"):
        synced = [i for i, (kind, name, _) in enumerate(events)
                  if kind == "fsync" and name == sealed + suffix]
        assert synced and created and synced[0] < created[0], (sealed + suffix, events)


def _config(inline_bytes: int) -> LogConfig:
    return LogConfig(enforce_fsync=True, group_commit=True, segment_size_bytes=200,
                     inline_write_max_bytes=inline_bytes)


@pytest.mark.parametrize("inline_bytes", [0, 64 * 1024], ids=["pipeline", "inline"])
async def test_the_send_path_fsyncs_a_full_segment_off_the_loop_before_the_next_exists(
        part_dir, inline_bytes):
    io = _Recording()
    part = Partition.open(part_dir, 1, _config(inline_bytes), io=io, clock=ManualClock())
    await (part.append_async(batch(4)) or asyncio.sleep(0))  # fills the first segment
    io.events.clear()
    loop_thread = threading.current_thread().name
    written = part.append_async(batch(4, tag=9))  # rolls it over
    assert written is not None  # not inline: it waits for the seal
    assert ("fsync", FIRST + ".log", loop_thread) not in io.events  # not on the loop
    await asyncio.wait_for(written, 5)
    fsyncs = [(name, thread) for kind, name, thread in io.events if kind == "fsync"]
    assert sorted(fsyncs) == [(FIRST + ".index", FSYNC_THREAD_NAME),
                              (FIRST + ".log", FSYNC_THREAD_NAME)]
    _synced_before_created(io.events, FIRST, SECOND)
    assert [s.start_offset for s in part.segments] == [0, 4] and part.next_offset == 8
    assert part.segments[0].seal_synced and not part.segments[0].dirty
    assert part.read_offset(4, 10).count == 4
    part.close()


async def test_a_failed_seal_fsync_fails_the_batch_and_keeps_what_was_synced(part_dir):
    io = FaultyIo(PosixIo(), "fsync-eio", 1)  # the first fsync: the seal's
    part = Partition.open(part_dir, 1, _config(0), io=io, clock=ManualClock())
    await part.append_async(batch(4))
    part.synced_to(4, part.epoch)  # as group commit reports its fsync
    with pytest.raises(IggyError) as failed:
        await asyncio.wait_for(part.append_async(batch(4, tag=9)), 5)
    assert failed.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert part.storage_failure is not None and len(part.segments) == 1
    assert part.next_offset == 4 and part.read_offset(0, 10).count == 4
    with pytest.raises(IggyError):  # refused until the server restarts
        await part.append_async(batch(1))
    part.close()
    reopened = Partition.open(part_dir, 1, _config(0), clock=ManualClock())
    assert reopened.next_offset == 4 and len(reopened.segments) == 1
    reopened.close()


async def test_batches_arriving_during_a_seal_wait_and_keep_their_order(part_dir):
    io = _Recording()
    part = Partition.open(part_dir, 1, _config(0), io=io, clock=ManualClock())
    await part.append_async(batch(4))
    sends = [part.append_async(batch(2, tag=t)) for t in (10, 20, 30)]
    assert part.pipeline.sealing and not part.pipeline.inflight
    await asyncio.wait_for(asyncio.gather(*sends), 5)
    assert not part.pipeline.sealing and part.next_offset == 10
    # two batches fill the second segment: the third waits for a second seal
    assert [s.start_offset for s in part.segments] == [0, 4, 8]
    assert {thread for kind, _, thread in io.events if kind == "fsync"} == {FSYNC_THREAD_NAME}
    _synced_before_created(io.events, FIRST, SECOND)
    _synced_before_created(io.events, SECOND, THIRD)
    stored = [m for start in (SECOND, THIRD)
              for m in messages(read_file(part_dir, start + ".log"))]
    assert [offset for offset, _, _ in stored] == list(range(4, 10))
    assert [payload[0] for _, _, payload in stored] == [10, 11, 20, 21, 30, 31]
    part.close()


class _Overlap(_Recording):
    """Counts fsyncs running at once; the first one waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.running, self.most = threading.Event(), 0, 0
        self.lock = threading.Lock()

    def fsync_in_worker(self, fd):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            first = len([e for e in self.events if e[0] == "fsync"]) == 0
        if first:
            self.gate.wait(5)
        try:
            self.fsync(fd)
        finally:
            with self.lock:
                self.running -= 1


async def test_a_seal_never_fsyncs_beside_a_group_commit_round(part_dir):
    """Linux reports a writeback error to one fsync of a file only: a seal's fsync beside a
    round's could take the error while the round acknowledges."""
    io = _Overlap()
    part = Partition.open(part_dir, 1, _config(0), io=io, clock=ManualClock())
    await part.append_async(batch(4))
    durable = GroupCommit().durable(part)  # its round holds in its first fsync
    written = part.append_async(batch(4, tag=9))  # the seal, queued meanwhile
    await asyncio.sleep(0.2)
    assert part.pipeline.sealing and not durable.done()
    io.gate.set()
    await asyncio.wait_for(asyncio.gather(durable, written), 5)
    assert io.most == 1  # one fsync at a time
    assert len([e for e in io.events if e[0] == "fsync"]) == 4  # the round's two, the seal's
    part.close()


class _SealFails(PosixIo):
    def fsync_in_worker(self, fd):
        raise OSError(errno.EIO, "Input/output error (injected)")


async def test_a_seal_failing_after_the_partition_closed_changes_nothing(part_dir):
    part = Partition.open(part_dir, 1, _config(0), io=_SealFails(), clock=ManualClock())
    await part.append_async(batch(4))
    part.synced_to(4, part.epoch)
    refused = part.append_async(batch(4, tag=9))  # waits for the seal
    assert part.pipeline.sealing
    part.close()  # a shutdown or a deletion meanwhile
    with pytest.raises(IggyError):
        await refused
    for _ in range(100):
        if not part.pipeline.sealing:
            break
        await asyncio.sleep(0.01)
    assert not part.pipeline.sealing and part.storage_failure is None
    reopened = Partition.open(part_dir, 1, _config(0), clock=ManualClock())
    assert reopened.next_offset == 4  # nothing cut by the closed partition
    reopened.close()
