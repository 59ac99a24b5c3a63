"""Group commit: every acknowledged batch is covered by an fsync; concurrent batches
share fsync rounds; a write during a round is covered by the next one; a round starts
every file's writeback before its first fsync."""

import asyncio

from lurcher.core.log.config import LogConfig
from lurcher.core.log.io import PosixIo
from lurcher.core.log.partition import Partition
from lurcher.core.shard.commit import GroupCommit
from lurcher.core.wire.batch import MessageBatch

CONFIG = LogConfig(segment_size_bytes=1 << 20, enforce_fsync=True, group_commit=True)


def batch() -> MessageBatch:
    return MessageBatch.build([b"x" * 100] * 10).writable()


async def test_concurrent_sends_share_fsync_rounds(tmp_path):
    partitions = [Partition.open(str(tmp_path / str(i)), i, CONFIG) for i in range(3)]
    commit = GroupCommit()

    async def send(partition):
        partition.append(batch())
        await commit.durable(partition)

    await asyncio.gather(*(send(partitions[i % 3]) for i in range(60)))
    assert commit.rounds < 60
    assert all(p.take_unsynced() == [] for p in partitions)
    assert sum(p.messages_count for p in partitions) == 600


async def test_write_during_a_round_is_covered_by_the_next_round(tmp_path):
    partition = Partition.open(str(tmp_path / "p"), 0, CONFIG)
    commit = GroupCommit()
    partition.append(batch())
    first = asyncio.ensure_future(commit.durable(partition))
    await asyncio.sleep(0)  # the first round is running now
    partition.append(batch())
    second = asyncio.ensure_future(commit.durable(partition))
    await asyncio.gather(first, second)
    assert commit.rounds == 2
    assert partition.take_unsynced() == []


def test_append_does_not_fsync_inline_under_group_commit(tmp_path):
    partition = Partition.open(str(tmp_path / "p"), 0, CONFIG)
    partition.append(batch())
    assert len(partition.take_unsynced()) == 2  # log + index left for the group commit


class CallOrderIo(PosixIo):
    """PosixIo recording its writeback starts and fsyncs from the group commit's thread."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def start_writeback(self, fd):
        self.calls.append(("writeback", fd))
        super().start_writeback(fd)

    def fsync_in_worker(self, fd):
        self.calls.append(("fsync", fd))
        super().fsync_in_worker(fd)


async def test_a_round_starts_every_files_writeback_before_its_first_fsync(tmp_path):
    calls: list = []
    partition = Partition.open(str(tmp_path / "p"), 0, CONFIG, io=CallOrderIo(calls))
    partition.append(batch())
    await GroupCommit().durable(partition)
    kinds = [kind for kind, _ in calls]
    assert kinds == ["writeback", "writeback", "fsync", "fsync"]  # the log and the index
    assert sorted(fd for kind, fd in calls if kind == "writeback") == sorted(
        fd for kind, fd in calls if kind == "fsync")

