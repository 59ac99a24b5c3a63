"""A replica filling its partition from a peer after adopting checkpoints: every batch lands
at the offset the group stored it at, also when a second checkpoint is adopted while the
first fill is still fetching and ops keep committing (the chaos test's divergence, forced
here step by step instead of by timing)."""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from lurcher.cluster import partition_service, partition_state
from lurcher.cluster.host import ClusterNode
from lurcher.core.replication.replica import Status
from lurcher.cluster.partition_ops import Append, DeleteOffset, PurgePartition, StoreOffset
from lurcher.cluster.partition_service import PURGES_FILE, PartitionService
from lurcher.cluster.partitions import ReplicatedPartitions
from lurcher.core.log.history_reads import HistoryReads
from lurcher.core.shard.reply import payload_bytes
from lurcher.cluster.partition_state import Filler, encode_state, fetch_decoder, stored_batches
from lurcher.core.log.partition import Partition
from lurcher.core.shard.reply import Parts
from lurcher.core.shard.dedup import Deduplication
from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.errors import IggyError

KEY = (0, 0, 1)
PER_BATCH = 10


def client_batch(number: int) -> MessageBatch:
    first = number * PER_BATCH
    return MessageBatch.build([b"message %d" % (first + j) for j in range(PER_BATCH)],
                              ids=[first + j + 1 for j in range(PER_BATCH)],
                              origin_timestamp_us=1)


def stamp_of(number: int) -> int:
    return 1_000_000 + number


def stored_batch_at(number: int, offset: int) -> bytes:
    """Batch ``number`` stamped stamp_of at ``offset``."""
    batch = client_batch(number).writable()
    batch.stamp(offset, stamp_of(number))
    return bytes(batch.blob)


def stored_batch(number: int) -> bytes:
    """Batch ``number`` as the group stored it: at offset number*10, stamped stamp_of."""
    batch = client_batch(number).writable()
    batch.stamp(number * PER_BATCH, stamp_of(number))
    return bytes(batch.blob)


class LogPartition:
    """A partition that keeps the stamped batches handed to it (written at once)."""

    def __init__(self, path: str, batches: int) -> None:
        self.path, self.clock = path, lambda: 0
        self.blobs = [stored_batch(n) for n in range(batches)]
        self.next_offset = batches * PER_BATCH
        self.first_offset = 0  # raised by retention
        self.offsets: dict[tuple[str, int], int] = {}  # (kind, id) -> stored offset
        self.history_reads = HistoryReads()  # its reads are never history (``Read``)

    def read_offset(self, offset: int, count: int) -> "Read":
        first = max(offset, self.first_offset) // PER_BATCH  # from the first kept one
        return Read(b"".join(self.blobs[first:first + count // PER_BATCH]))

    def purge(self) -> None:
        self.blobs, self.next_offset, self.offsets = [], 0, {}

    def get_offset(self, kind: str, key: int) -> int | None:
        return self.offsets.get((kind, key))

    def stored_offsets(self, kind: str) -> dict[int, int]:
        return {key: offset for (k, key), offset in self.offsets.items() if k == kind}

    def store_offset(self, kind: str, key: int, offset: int) -> None:
        self.offsets[(kind, key)] = offset

    def delete_offset(self, kind: str, key: int) -> None:
        del self.offsets[(kind, key)]

    def truncate_to(self, next_offset: int) -> None:
        del self.blobs[next_offset // PER_BATCH:]
        self.next_offset = next_offset

    def store(self, batch: MessageBatch) -> None:
        batch.stamp(self.next_offset, batch.stamp_us or self.clock())
        self.blobs.append(bytes(batch.blob))
        self.next_offset += batch.count


class Read(bytes):
    """Stored messages as ``read_offset`` answers them (whole batches here)."""

    history = False

    @property
    def total_bytes(self) -> int:
        return len(self)

    def pieces(self) -> list[bytes]:
        return [bytes(self)]


class Node:
    """One replica's shard (only what ``PartitionService`` touches) and a peer to fill
    from whose answers the test releases one at a time."""

    def __init__(self, tmp_path, batches_held: int) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.partition = LogPartition(str(tmp_path), batches_held)
        topic = SimpleNamespace(partition_created_at={1: 0})
        self.shard = SimpleNamespace(
            partitions={KEY: self.partition},
            meta=SimpleNamespace(state=SimpleNamespace(
                streams={0: SimpleNamespace(topics={0: topic})})),
            dedup=Deduplication(False, 1000, 10**9),
            limits=SimpleNamespace(max_poll_reply_bytes=10**9),
            append=lambda partition, batch: partition.store(batch),
            partition_purged=lambda *key: None)  # no consumer group here
        self.service = PartitionService(self.shard, SimpleNamespace(accepted=10**6))
        self.service.filler = Filler(self.shard, self.fetch, 11)
        self.asked: list[tuple[object, asyncio.Future]] = []

    async def fetch(self, group: int, body: bytes) -> bytes:
        answer = asyncio.get_running_loop().create_future()
        self.asked.append((fetch_decoder.decode(body), answer))
        return await answer

    async def answer_one(self) -> None:
        ask, answer = self.asked.pop(0)
        first = ask.offset // PER_BATCH
        answer.set_result(b"".join(stored_batch(n) for n in
                                   range(first, first + ask.count // PER_BATCH)))
        await settle()

    def adopt(self, calls: int, stored_messages: int) -> None:
        self.service.restore(encode_state(calls, {KEY: stored_messages}, [],
                                          self.shard.dedup, {}))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def append_op(number: int) -> bytes:
    batch = client_batch(number)
    return msgspec.msgpack.encode(Append(0, *KEY, 0, stamp_of(number), batch.count,
                                         bytes(batch.index), batch.blob))


async def test_second_checkpoint_during_a_fill_keeps_every_batch_at_its_offset(tmp_path):
    node = Node(tmp_path, batches_held=1)  # holds offsets 0..9
    node.adopt(calls=3, stored_messages=30)  # the group stored 0..29
    await settle()
    assert len(node.asked) == 1  # fetching 10..29, not answered yet
    node.adopt(calls=6, stored_messages=60)  # a later checkpoint: the group stored 0..59
    await settle()
    result = node.service.apply(append_op(6))  # committed after it: belongs at 60..69
    await settle()
    await node.answer_one()  # the first fetch comes back
    while node.asked:
        await node.answer_one()
    await asyncio.wait_for(node.service.effect(result), 5)
    assert not node.service.filling
    assert node.partition.blobs == [stored_batch(n) for n in range(7)]


async def test_an_append_past_the_partition_end_fills_first(tmp_path):
    node = Node(tmp_path, batches_held=2)
    node.service.stored[KEY] = 40  # the group had stored 0..39 (e.g. writes lost here)
    result = node.service.apply(append_op(4))
    await settle()
    assert len(node.partition.blobs) == 2  # refused to store it at offset 20
    while node.asked:
        await node.answer_one()
    await asyncio.wait_for(node.service.effect(result), 5)
    assert node.partition.blobs == [stored_batch(n) for n in range(5)]


def answering(node: Node) -> ReplicatedPartitions:
    """``node``'s fetch answers (only what ``_fetch`` touches)."""
    replicated = object.__new__(ReplicatedPartitions)
    replicated.shard, replicated.services = node.shard, {11: node.service}
    replicated.refused_fills = {}
    return replicated


def purge_op() -> bytes:
    return msgspec.msgpack.encode(PurgePartition(0, *KEY, 0))


async def test_a_fill_never_copies_messages_of_an_earlier_purge_generation(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(partition_state, "RETRY_S", 0)
    peer = Node(tmp_path / "b", batches_held=0)  # B: has executed three sends, not the purge
    for number in range(3):
        peer.service.apply(append_op(number))
    await settle()
    filler = Node(tmp_path / "c", batches_held=3)  # C: adopts purge + one send after it
    asked = []

    async def from_peer(group: int, body: bytes) -> bytes:
        asked.append(fetch_decoder.decode(body))
        return payload_bytes(await answering(peer)._fetch(group, body))

    filler.service.filler.fetch = from_peer
    filler.service.restore(encode_state(4, {KEY: 10}, [], filler.shard.dedup, {KEY: 1}))
    await settle()
    assert filler.partition.blobs == []  # B's messages are of the purged generation
    assert asked and (asked[0].created_at, asked[0].purges) == (0, 1)
    peer.service.apply(purge_op())  # B catches up: the purge, then the send after it
    peer.service.apply(append_op(7))
    await asyncio.wait_for(filler.service.fill_task, 5)
    assert filler.partition.blobs == peer.partition.blobs == [stored_batch_at(7, 0)]


async def test_a_fetch_for_a_recreated_topic_or_an_unexecuted_range_is_refused(tmp_path):
    peer = Node(tmp_path, batches_held=2)
    peer.service.stored[KEY] = 20
    fetch = answering(peer)._fetch
    ask = partition_state.Fetch(KEY, 0, 20, 0, 0)
    assert payload_bytes(await fetch(11, msgspec.msgpack.encode(ask))) == \
        stored_batch(0) + stored_batch(1)
    for refused in (partition_state.Fetch(KEY, 0, 20, 5, 0),  # a later topic, same ids
                    partition_state.Fetch(KEY, 0, 20, 0, 1)):  # after a purge B lacks
        with pytest.raises(IggyError):
            await fetch(11, msgspec.msgpack.encode(refused))
    peer.service.stored[KEY] = 10  # held on disk, but the group's order here is behind
    with pytest.raises(IggyError):
        await fetch(11, msgspec.msgpack.encode(ask))


class SlowDisk:
    """Writes that complete when the test says, in order; a failed one leaves nothing and
    the next one is written where it would have gone (as the partition's pipeline does)."""

    def __init__(self, partition: LogPartition) -> None:
        self.partition = partition
        self.handed: list[tuple[MessageBatch, asyncio.Future]] = []

    def append(self, partition: LogPartition, batch: MessageBatch) -> asyncio.Future:
        written = asyncio.get_running_loop().create_future()
        self.handed.append((batch, written))
        return written

    async def complete(self, ok: bool) -> None:
        batch, written = self.handed.pop(0)
        if ok:
            self.partition.store(batch)
            written.set_result(None)
        else:
            written.set_exception(OSError(5, "Input/output error"))
        await settle()


async def test_a_failed_write_is_cut_back_and_filled_before_the_next_append(tmp_path):
    node = Node(tmp_path, batches_held=0)
    disk = SlowDisk(node.partition)
    node.shard.append = disk.append
    first, second = node.service.apply(append_op(0)), node.service.apply(append_op(1))
    await settle()
    await disk.complete(ok=False)  # batch 0 fails: batch 1 lands at offset 0
    await disk.complete(ok=True)
    third = node.service.apply(append_op(2))  # belongs at 20..29
    await settle()
    assert not disk.handed  # held until the partition is mended
    while node.asked or disk.handed:  # the fill's fetch and writes, then batch 2's
        if node.asked:
            await node.answer_one()
        else:
            await disk.complete(ok=True)
    await asyncio.wait_for(node.service.effect(third), 5)
    assert node.partition.blobs == [stored_batch(n) for n in range(3)]
    with pytest.raises(OSError):  # reported to its waiter (on a primary)
        await node.service.effect(first)
    await node.service.effect(second)  # written (where it did not belong), then mended


async def test_each_batch_is_stamped_with_its_own_op_time_after_a_refused_one(tmp_path):
    node = Node(tmp_path, batches_held=0)
    partition = Partition.open(str(tmp_path / "log"), 1)  # the real stamping
    node.shard.partitions[KEY] = partition
    node.shard.append = lambda partition, batch: partition.append(batch)
    partition.storage_failure = "fsync failed"  # refuses before reading its clock
    refused = node.service.apply(append_op(0))
    with pytest.raises(IggyError):
        await node.service.effect(refused)
    partition.storage_failure = None
    second = node.service.apply(append_op(1))
    await settle()
    await node.answer_one()  # batch 0 as the others stored it, copied first
    await asyncio.wait_for(node.service.effect(second), 5)
    stored = stored_batches(payload_bytes(Parts([partition.read_offset(0, 20)])))
    assert [stamp for stamp, _ in stored] == [stamp_of(0), stamp_of(1)]
    partition.close()


async def test_a_fetch_from_offsets_retention_deleted_is_refused_in_one_clear_line(
        tmp_path, caplog):
    peer = Node(tmp_path, batches_held=3)
    peer.service.stored[KEY] = 30
    peer.partition.first_offset = 10  # retention deleted offsets 0..9 here
    replicated = answering(peer)
    for _ in range(5):  # an asker waiting for its other peers retries every 0.2 s
        with pytest.raises(IggyError):
            await replicated._fetch(11, msgspec.msgpack.encode(
                partition_state.Fetch(KEY, 0, 30, 0, 0)))
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage().endswith("retention deleted it here (first kept offset 10)")
            for r in warned] == [True]  # once, not once per retry


def test_a_node_still_filling_does_not_take_its_primary_back(tmp_path):
    views = []
    node = Node(tmp_path, batches_held=0)
    replica = SimpleNamespace(status=Status.NORMAL, is_primary=False, commit=5, now=0, view=1,
                              request_view=views.append)
    host = SimpleNamespace(config=SimpleNamespace(rebalance_after_ticks=2, names=["a", "b"]),
                           rebalanced={11}, index=0, link_up=lambda member: True,
                           _apply=lambda group, effects: None)
    ReplicatedPartitions(node.shard, host, None, {11: node.service}, None, 1.0)  # wires it
    group = SimpleNamespace(replica=replica, members=[0, 1], primary_commit=5,
                            caught_up_since=None)
    node.service.filling = True
    for now in range(10):
        replica.now = now
        ClusterNode._maybe_take_back(host, 11, group)
    assert views == []
    node.service.filling = False
    for now in range(10, 20):
        replica.now = now
        ClusterNode._maybe_take_back(host, 11, group)
    assert views and set(views) == {2}  # asked (again each wait while not primary)


def answerable(partition: LogPartition) -> None:
    """What ``_get_offset`` reads of a partition besides its offsets, on ``LogPartition``."""
    partition.partition_id, partition.current_offset = KEY[2], partition.next_offset - 1


async def test_a_primary_answers_reads_only_once_the_ops_it_executed_reached_the_partition(
        tmp_path):
    """A new primary still holding an executed op of the partition (waiting for metadata
    this node has not applied, as a fill would hold it) does not answer from the older
    state: the read waits until the op is carried out."""
    node = Node(tmp_path, batches_held=1)
    answerable(node.partition)
    node.service.meta.accepted = 0
    node.service.apply(msgspec.msgpack.encode(StoreOffset(1, *KEY, 0, "consumers", 7, 5)))
    replicated = answering(node)
    replicated.timeout_s = 5
    replicated.meta = SimpleNamespace(reached=lambda count, timeout_s: asyncio.sleep(0, True))
    ask = msgspec.msgpack.encode(StoreOffset(0, *KEY, 0, "consumers", 7, 0))
    read = asyncio.ensure_future(replicated._get_offset(11, ask))
    await settle()
    assert not read.done()  # the old code answered None: no offset stored
    node.service.meta.accepted = 1  # the metadata arrives; the op is carried out
    node.service.metadata_applied()
    assert (await asyncio.wait_for(read, 5)).stored_offset == 5


async def test_a_fill_of_a_partition_deleted_meanwhile_gives_way_to_its_successor(
        tmp_path, monkeypatch):
    """A replica filling a partition no peer serves any more (its topic deleted, a new
    one created with its ids) gives the fill up once its metadata has the new partition,
    and the group's ops of the new one run (the fill held them for ever before)."""
    monkeypatch.setattr(partition_state, "RETRY_S", 0)
    node = Node(tmp_path / "old", batches_held=1)

    async def refusing(group: int, body: bytes) -> bytes:
        raise IggyError(4100, "this replica lacks them too")

    node.service.filler.fetch = refusing
    node.service.restore(encode_state(3, {KEY: 30}, [], node.shard.dedup, {}, {KEY: 0}))
    await settle()
    assert node.service.filling
    successor = created_again(node, tmp_path)
    node.service.metadata_applied()
    await asyncio.wait_for(node.service.fill_task, 5)
    await first_batch_lands_at_offset_0(node, successor)


async def test_the_counts_of_deleted_partitions_leave_the_state_at_the_next_checkpoint(
        tmp_path):
    """A group's state keeps counts only of partitions the metadata has: created and
    deleted topics do not grow it (nor every checkpoint) for ever."""
    node = Node(tmp_path, batches_held=0)
    await asyncio.wait_for(node.service.effect(node.service.apply(append_op(0))), 5)
    assert node.service.stored == {KEY: 10}
    kept = partition_state.decode_state(node.service.snapshot(), node.shard.dedup)
    assert [tuple(k) for k, _ in kept.stored] == [KEY]
    node.shard.partitions.pop(KEY)  # the topic is deleted
    node.shard.meta.state.streams[0].topics.clear()
    state = partition_state.decode_state(node.service.snapshot(), node.shard.dedup)
    assert (state.stored, state.purged, state.created) == ([], [], [])
    assert node.service.stored == node.service.created == {}


async def test_a_primary_behind_the_caller_s_metadata_answers_task_timeout(tmp_path):
    """A primary that has not applied, within the timeout, the metadata a call was made on
    (the topic created there) says so: TaskTimeout, to retry, not 'partition not found'."""
    node = Node(tmp_path, batches_held=1)
    node.shard.meta.state.streams.clear()  # this node has not applied the topic yet
    replicated = answering(node)
    replicated.timeout_s = 0
    replicated.meta = SimpleNamespace(reached=lambda count, timeout_s: asyncio.sleep(0, False))
    ask = msgspec.msgpack.encode(StoreOffset(1, *KEY, 0, "consumers", 7, 0))
    with pytest.raises(IggyError) as refused:
        await replicated._get_offset(11, ask)
    assert refused.value.status == 12001  # PartitionNotFound (3007) on the old code


async def test_an_op_of_a_deleted_partition_never_starts_a_fill_of_its_successor(tmp_path):
    """A replica catching up executes an op of a partition its metadata has deleted since,
    a later one holding its ids: the op is refused, as everywhere, and starts no fill of
    the later partition to the deleted one's count (which held the group's ops)."""
    node = Node(tmp_path / "old", batches_held=0)
    for number in range(3):
        await asyncio.wait_for(node.service.effect(node.service.apply(append_op(number))), 5)
    successor = created_again(node, tmp_path)
    late = node.service.apply(append_op(3))  # the deleted partition's last op
    await settle()
    assert not node.service.filling and node.asked == []
    with pytest.raises(IggyError):
        await asyncio.wait_for(node.service.effect(late), 5)
    await first_batch_lands_at_offset_0(node, successor)


async def test_an_adopted_checkpoint_s_unreached_counts_are_looked_at_per_metadata_change(
        tmp_path, monkeypatch):
    """Counts of a partition this node's metadata lacks (deleted since, or not applied
    yet) wait for a metadata change, not looked up again at every op the group runs."""
    node = Node(tmp_path, batches_held=0)
    gone = (0, 0, 9)
    node.service.restore(encode_state(0, {gone: 10}, [], node.shard.dedup, {}, {gone: 7}))
    looked = []
    reach = node.service._reach_counts
    monkeypatch.setattr(node.service, "_reach_counts", lambda: looked.append(1) or reach())
    for number in range(3):
        await asyncio.wait_for(node.service.effect(node.service.apply(append_op(number))), 5)
    assert looked == [] and node.service.unreached == {gone}
    node.service.metadata_applied()
    assert looked == [1]


async def test_reads_that_time_out_or_are_cancelled_waiting_for_a_partition_leave_no_waiter(
        tmp_path):
    """A primary whose partition stays held (an op waiting for metadata, as a stuck fill
    would hold it) answers reads TaskTimeout; each read that timed out, or whose caller
    went away, is no longer listed (they piled up until the next drain), and a read still
    waiting is woken as before."""
    node = Node(tmp_path, batches_held=1)
    node.service.meta.accepted = 0
    node.service.apply(msgspec.msgpack.encode(StoreOffset(1, *KEY, 0, "consumers", 7, 5)))
    for _ in range(3):
        assert not await node.service.settled(KEY, 0)
    gone = asyncio.ensure_future(node.service.settled(KEY, 60))
    await settle()
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert node.service.settling == []  # four waiters on the old code
    waiting = asyncio.ensure_future(node.service.settled(KEY, 60))
    await settle()
    node.service.meta.accepted = 1
    node.service.metadata_applied()
    assert await asyncio.wait_for(waiting, 5)
    assert node.service.settling == []


class Unscanned(deque):
    """A group's queue of ops that fails the test when it is scanned op by op."""

    def __iter__(self):
        raise AssertionError("the queued ops were scanned")


async def test_waiting_reads_are_checked_without_scanning_the_queued_ops(tmp_path):
    """Whether a partition still has ops to reach (a read waiting on a primary that is
    catching up) is known without going through the group's queued ops: that was done for
    every waiting read at every op the group ran, so reads waiting during a long catch-up
    cost the send path in proportion to the queue."""
    node = Node(tmp_path, batches_held=1)
    answerable(node.partition)
    node.service.meta.accepted = 0
    node.service.queue = Unscanned()
    other = (0, 0, 2)
    node.service.apply(msgspec.msgpack.encode(StoreOffset(1, *other, 0, "consumers", 7, 5)))
    node.service.apply(msgspec.msgpack.encode(StoreOffset(1, *KEY, 0, "consumers", 7, 5)))
    assert node.service.holds(KEY) and node.service.holds(other)  # scanned on the old code
    assert not node.service.holds((0, 0, 3))
    waiting = asyncio.ensure_future(node.service.settled(KEY, 60))
    await settle()
    node.service.apply(msgspec.msgpack.encode(StoreOffset(1, *KEY, 0, "consumers", 8, 5)))
    assert not waiting.done()
    node.service.shard.meta.state.streams[0].topics[0].partition_created_at[2] = 0
    node.service.shard.partitions[other] = node.partition
    node.service.meta.accepted = 1
    node.service.metadata_applied()
    assert await asyncio.wait_for(waiting, 5)
    assert not node.service.holds(KEY) and not node.service.holds(other)


def refusing_purges(partition: LogPartition, times: int) -> None:
    """``partition``'s next ``times`` purges fail as a file that cannot be set aside does
    (CannotDeleteFile, nothing changed); a purge also drops its stored offsets."""
    purge = partition.purge

    def refusing() -> None:
        nonlocal times
        if times:
            times -= 1
            raise IggyError(10008, "not purged: [Errno 5] Input/output error")
        purge()
    partition.purge = refusing


async def test_a_purge_the_partition_refuses_is_done_again_before_its_later_ops(
        tmp_path, monkeypatch):
    """The group purged; this replica's files refused it twice. Its later ops (an offset,
    a send) wait, and it serves no read, until the purge is done here; then they run on
    the empty partition, as on every other replica. (The old code counted the purge done:
    the send was skipped as 'stored already' within the old messages, and the offset kept.)"""
    monkeypatch.setattr(partition_service, "PURGE_RETRY_S", 0)
    node = Node(tmp_path, batches_held=3)
    node.service.stored[KEY] = 30
    refusing_purges(node.partition, times=2)
    node.service.apply(purge_op())
    node.service.apply(msgspec.msgpack.encode(StoreOffset(0, *KEY, 0, "consumers", 7, 0)))
    send = node.service.apply(append_op(7))
    assert node.service.holds(KEY)  # a primary answers no read of it meanwhile
    assert len(node.partition.blobs) == 3 and node.partition.get_offset("consumers", 7) is None
    await asyncio.wait_for(node.service.effect(send), 5)
    assert node.partition.blobs == [stored_batch_at(7, 0)]
    assert node.partition.get_offset("consumers", 7) == 0
    assert not node.service.holds(KEY)


async def test_an_adopted_checkpoint_s_purge_the_partition_refuses_is_done_before_its_fill(
        tmp_path, monkeypatch):
    """A checkpoint counting a purge this replica missed, adopted while its files refuse
    the purge: adopting it does not fail (the old code raised CannotDeleteFile out of
    ``restore``), and the partition is purged, then filled from the peer."""
    monkeypatch.setattr(partition_service, "PURGE_RETRY_S", 0)
    node = Node(tmp_path, batches_held=3)
    refusing_purges(node.partition, times=1)
    node.service.restore(encode_state(4, {KEY: 10}, [], node.shard.dedup, {KEY: 1}))
    assert node.service.holds(KEY)
    await settle()
    await node.answer_one()  # asked from offset 0 once purged
    await asyncio.wait_for(node.service.fill_task, 5)
    assert node.partition.blobs == [stored_batch(0)]
    assert not node.service.holds(KEY)


def created_again(node, tmp_path) -> LogPartition:
    """The topic of ``KEY`` deleted and created again (its partition created at 5): the
    new, empty partition that holds the deleted one's ids."""
    successor = LogPartition(str(tmp_path / "new"), 0)
    node.shard.partitions[KEY] = successor
    node.shard.meta.state.streams[0].topics[0].partition_created_at[KEY[2]] = 5
    return successor


async def first_batch_lands_at_offset_0(node, successor: LogPartition) -> None:
    """The new partition's first op (made at 5) is stored from offset 0."""
    batch = client_batch(0)
    result = node.service.apply(msgspec.msgpack.encode(Append(
        0, *KEY, 5, stamp_of(0), batch.count, bytes(batch.index), batch.blob)))
    await asyncio.wait_for(node.service.effect(result), 5)
    assert successor.blobs == [stored_batch_at(0, 0)]


async def test_a_checkpoint_carries_the_stored_offsets_and_an_adopting_replica_takes_them(
        tmp_path):
    """The offsets a checkpoint's ops stored (and deleted) are in its state; a replica that
    adopts it, never executing those ops, ends with exactly them (the old state had no
    offsets: the adopting replica kept what it had, and lacked what it never executed),
    but for a consumer group its metadata deleted (that deletion removed its offsets here)."""
    source = Node(tmp_path / "source", batches_held=1)
    for consumer, offset in ((7, 3), (8, 2)):
        source.service.apply(msgspec.msgpack.encode(
            StoreOffset(0, *KEY, 0, "consumers", consumer, offset)))
    for group in (1, 2):
        source.service.apply(msgspec.msgpack.encode(
            StoreOffset(0, *KEY, 0, "groups", group, 4)))
    source.service.apply(msgspec.msgpack.encode(DeleteOffset(0, *KEY, 0, "consumers", 8)))
    adopting = Node(tmp_path / "adopting", batches_held=1)
    adopting.partition.offsets = {("consumers", 8): 2, ("consumers", 9): 1}
    adopting.shard.meta.state.streams[0].topics[0].groups = {1: "g"}  # group 2 deleted here
    adopting.service.restore(source.service.snapshot())
    assert adopting.partition.offsets == {("consumers", 7): 3, ("groups", 1): 4}


async def test_a_replica_that_purged_past_an_adopted_checkpoint_keeps_its_offsets(tmp_path):
    """Its partition went through a purge the checkpoint does not count: the checkpoint's
    offsets are from before it, and the log after the checkpoint stores the ones that
    count."""
    source = Node(tmp_path / "source", batches_held=1)
    source.service.apply(msgspec.msgpack.encode(StoreOffset(0, *KEY, 0, "consumers", 7, 3)))
    purged = Node(tmp_path / "purged", batches_held=0)
    partition_service.replace_whole(Path(purged.partition.path) / PURGES_FILE, b"1")
    purged.partition.offsets = {("consumers", 9): 0}
    purged.service.restore(source.service.snapshot())
    assert purged.partition.offsets == {("consumers", 9): 0}


async def test_a_checkpoint_taken_while_a_purge_is_owed_carries_no_offsets(tmp_path,
                                                                           monkeypatch):
    """The group purged; this replica's files refused it, and its offsets are still
    there: a checkpoint it takes meanwhile says what the group has (none), not what its
    files hold, so nobody adopting it puts the purged offsets back."""
    monkeypatch.setattr(partition_service, "PURGE_RETRY_S", 60)
    node = Node(tmp_path, batches_held=3)
    node.partition.offsets = {("consumers", 7): 5}
    refusing_purges(node.partition, times=1)
    node.service.apply(purge_op())
    assert node.service.holds(KEY) and node.partition.offsets  # owed
    state = partition_state.decode_state(node.service.snapshot(), node.shard.dedup)
    assert [(tuple(k), v) for k, v in state.offsets] == [(KEY, [])]


async def test_offset_ops_before_a_purge_the_partition_did_are_not_executed_again(tmp_path):
    """After a restart the log is executed again; an offset op that came before a purge
    the partition already went through is not stored again (the purge is not done again,
    so the old code brought the purged offset back)."""
    node = Node(tmp_path, batches_held=0)
    partition_service.replace_whole(Path(node.partition.path) / PURGES_FILE, b"1")
    node.service.apply(msgspec.msgpack.encode(StoreOffset(0, *KEY, 0, "consumers", 7, 3)))
    assert node.partition.offsets == {}
    node.service.apply(purge_op())  # the purge it went through: counted, not done again
    node.service.apply(msgspec.msgpack.encode(StoreOffset(0, *KEY, 0, "consumers", 7, 4)))
    assert node.partition.offsets == {("consumers", 7): 4}


async def test_an_adopted_checkpoint_s_offsets_never_land_on_a_later_partition(
        tmp_path, monkeypatch):
    """A checkpoint adopted while the partition owes a purge keeps its offsets until the
    purge is done. Its topic deleted meanwhile, they go with the counts at the next
    checkpoint: a topic created again with the same ids, whose own purge is done later,
    never gets them (the old code kept them, and put them on it)."""
    monkeypatch.setattr(partition_service, "PURGE_RETRY_S", 60)
    node = Node(tmp_path, batches_held=3)
    refusing_purges(node.partition, times=1)
    node.service.restore(encode_state(4, {KEY: 0}, [], node.shard.dedup, {KEY: 1}, {KEY: 0},
                                      {KEY: [("consumers", 7, 0)]}))
    assert node.service.offsets_to == {KEY: [("consumers", 7, 0)]}  # owed: not put yet
    node.shard.partitions.pop(KEY)  # the topic is deleted
    node.shard.meta.state.streams[0].topics.clear()
    node.service.snapshot()
    assert node.service.offsets_to == {}
