"""A replica filling its partition from a peer after adopting checkpoints: every batch lands
at the offset the group stored it at, also when a second checkpoint is adopted while the
first fill is still fetching and ops keep committing (the chaos test's divergence, forced
here step by step instead of by timing)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import msgspec

from lurcher.cluster.partition_ops import Append
from lurcher.cluster.partition_service import PartitionService
from lurcher.cluster.partition_state import Filler, encode_state, fetch_decoder
from lurcher.core.shard.dedup import Deduplication
from lurcher.core.wire.batch import MessageBatch

KEY = (0, 0, 1)
PER_BATCH = 10


def client_batch(number: int) -> MessageBatch:
    first = number * PER_BATCH
    return MessageBatch.build([b"message %d" % (first + j) for j in range(PER_BATCH)],
                              ids=[first + j + 1 for j in range(PER_BATCH)],
                              origin_timestamp_us=1)


def stamp_of(number: int) -> int:
    return 1_000_000 + number


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

    def store(self, batch: MessageBatch) -> None:
        batch.stamp(self.next_offset, self.clock())
        self.blobs.append(bytes(batch.blob))
        self.next_offset += batch.count


class Node:
    """One replica's shard (only what ``PartitionService`` touches) and a peer to fill
    from whose answers the test releases one at a time."""

    def __init__(self, tmp_path, batches_held: int) -> None:
        self.partition = LogPartition(str(tmp_path), batches_held)
        topic = SimpleNamespace(partition_created_at={1: 0})
        self.shard = SimpleNamespace(
            partitions={KEY: self.partition},
            meta=SimpleNamespace(state=SimpleNamespace(
                streams={0: SimpleNamespace(topics={0: topic})})),
            dedup=Deduplication(False, 1000, 10**9),
            append=lambda partition, batch: partition.store(batch))
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
