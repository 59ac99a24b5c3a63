"""Partitions replicated through their replication groups: sends, polls, consumer offsets.

Each partition belongs to one partition group (``partition_groups``: fixed by the node count,
the ids and the topic's ``replication_factor``); its replicas are the group's members.

Writes are ops of the group, executed on every replica in commit order (``PartitionService``):
- ``Append``: one whole send batch (never one op per message; one Prepare carries up to
  ``max_batch`` of them). The receiving node validates it, fills ids left 0 with random ids
  and stamps its clock (``timestamp_us``), so every replica stores identical bytes: at
  execution the partition's clock (``OpClock``) answers the op's timestamp (the batch
  timestamp is ``max(op timestamp, last + 1)``, the same everywhere), deduplication runs with the op's
  timestamp as "now" on the same history, so it drops the same messages everywhere.
- ``StoreOffset`` / ``DeleteOffset``: a consumer's or group's offset (StoreConsumerOffset,
  a poll with auto-commit, DeleteConsumerOffset), so a consumer resumes where it was on any
  replica after a failover.

A message reaches a partition log only when its op is committed (on a quorum of the group's
journals: in the page cache, and fsynced before the acknowledgement with
``system.partition.enforce_fsync``, since ``shard.append`` then waits for the fsync) and
executed, so a poll never returns an uncommitted message. A send is answered once the op is
committed and written on the primary. Sends, polls and offsets (stores and reads) run on the
group's primary (``forwarding``): a node that is not it forwards them, so a client sees its
acknowledged sends in its next poll on any node.

Ordering with the metadata: an op carries ``meta_base``, the number of metadata changes the
deciding node had applied; a replica executes it only once it applied as many (a topic
created just before may not have reached it yet), holding later ops of the group behind it.
``created_at`` (the partition's creation time) tells a partition from a later one with the
same ids: an op for a deleted partition is skipped alike everywhere.

Restarts: a replica re-executes its group's committed log from the start; an ``Append`` whose
messages the partition log already holds (counted per partition since the start) is not
stored again (deduplication still sees it). Checkpoints (``partition_state``) bound each
group's log; a replica adopting one copies the messages it lacks from another replica.
Known limit: a node-local purge or segment deletion does not go through the group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import os
from collections import deque
from typing import Any

import msgspec
import numpy as np

from lurcher.cluster.forwarding import Forwarder
from lurcher.cluster.host import ClusterBusy
from lurcher.cluster.partition_groups import GroupLayout
from lurcher.cluster.partition_state import Filler, decode_state, encode_state, fetch_decoder
from lurcher.core.shard.cluster import payload_of
from lurcher.core.shard.dedup import ID_BYTES, message_ids
from lurcher.core.shard.handlers.offsets import offset_target
from lurcher.core.shard.handlers.messages import POLL_PREFIX, empty_poll, within_reply_cap
from lurcher.core.shard.placement import choose_partition, resolve
from lurcher.core.shard.reply import Parts
from lurcher.core.wire.batch import ID_AT, MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo

log = logging.getLogger(__name__)

REMEMBERED_FAILURES = 1024
_ID_SPAN = np.arange(ID_BYTES, dtype=np.int64)


class Addressed(msgspec.Struct, array_like=True, frozen=True):
    """What every op and call starts with: the metadata it was decided on and the
    partition (ids and creation time)."""

    meta_base: int
    stream_id: int
    topic_id: int
    partition_id: int
    created_at: int


class Append(Addressed, tag=1):
    timestamp_us: int
    count: int
    index: bytes
    blob: bytes


class ConsumerAt(Addressed):
    kind: str
    key: int


class StoreOffset(ConsumerAt, tag=2):
    offset: int


class DeleteOffset(ConsumerAt, tag=3):
    pass


class Poll(ConsumerAt):
    strategy: int
    value: int
    count: int
    auto_commit: bool


class Polled(msgspec.Struct, array_like=True, frozen=True):
    last_offset: int  # -1: nothing polled
    payload: bytes


Op = Append | StoreOffset | DeleteOffset
_op_decoder = msgspec.msgpack.Decoder(Op)
_poll_decoder = msgspec.msgpack.Decoder(Poll)
_polled_decoder = msgspec.msgpack.Decoder(Polled)


def with_ids(batch: MessageBatch) -> bytearray:
    """The batch's blob (a copy) with every id left 0 replaced by a random one."""
    blob = bytearray(batch.blob)
    ids = message_ids(batch)
    zero = ids == np.zeros(1, dtype="V16")
    k = int(np.count_nonzero(zero))
    if k:
        at = (batch.starts()[zero] + ID_AT)[:, None] + _ID_SPAN
        np.frombuffer(blob, dtype=np.uint8)[at] = np.frombuffer(
            os.urandom(ID_BYTES * k), dtype=np.uint8).reshape(k, ID_BYTES)
    return blob


class OpClock:
    """A replicated partition's clock: the timestamps of the ops appended to it, in order.

    The partition reads its clock once per batch it stamps, in the order the batches were
    handed to it, but possibly later (its pipeline holds batches back while
    ``max_inflight_batches`` are in flight), so the clock hands out each op's timestamp in
    turn rather than "the latest op's". Before any op (opening) it is the wall clock."""

    def __init__(self, wall: Any) -> None:
        self.wall, self.last = wall, 0
        self.stamps: deque[int] = deque()

    def __call__(self) -> int:
        if self.stamps:
            self.last = self.stamps.popleft()
        return self.last or self.wall()


class PartitionService:
    """One partition group's replicated object on this node (see the module doc)."""

    def __init__(self, shard: Any, meta: Any) -> None:
        self.shard, self.meta = shard, meta
        self.calls = 0  # requests executed since the replica started: the same everywhere
        self.queue: deque[tuple[int, Op]] = deque()  # executed, waiting for metadata
        self.done: dict[int, asyncio.Future] = {}  # position -> its local effect, until done
        self.failed: dict[int, BaseException] = {}  # recent positions whose effect failed
        self.stored: dict[tuple[int, int, int], int] = {}  # messages per partition so far
        self.filling = False  # copying messages a restored checkpoint counts (``Filler``)
        self.filler: Filler | None = None  # set once the node's forwarder exists

    def apply(self, body: bytes) -> bytes:
        position = self.calls
        self.calls += 1
        self.done[position] = asyncio.get_running_loop().create_future()
        self.queue.append((position, _op_decoder.decode(body)))
        self.drain()
        return position.to_bytes(8, "little")

    def drain(self) -> None:
        """Carry out queued ops whose metadata this node has applied, in order."""
        while not self.filling and self.queue and self.queue[0][1].meta_base <= self.meta.accepted:
            position, op = self.queue.popleft()
            try:
                effect = self._execute(op)
            except Exception as exc:  # noqa: BLE001 - every replica sees the same op
                effect = exc
            self._settle(position, effect)

    def _settle(self, position: int, effect: Any) -> None:
        future = self.done[position]
        if isinstance(effect, BaseException):
            self._finish(position, future, effect)
        elif inspect.isawaitable(effect):
            task = asyncio.ensure_future(effect)
            task.add_done_callback(lambda t: self._finish(
                position, future, None if t.cancelled() else t.exception()))
        else:
            self._finish(position, future, None)

    def _finish(self, position: int, future: asyncio.Future, error: BaseException | None) -> None:
        del self.done[position]
        if error is not None:
            if not isinstance(error, IggyError):
                log.error("replicated op %d failed on this node: %s", position, error)
            self.failed[position] = error
            while len(self.failed) > REMEMBERED_FAILURES:
                del self.failed[next(iter(self.failed))]
            future.set_exception(error)
            future.exception()  # nobody may wait for it (a backup): not "never retrieved"
        else:
            future.set_result(None)

    async def effect(self, result: bytes) -> None:
        """Wait for the local effect of the op whose result is ``result``. Raises what it
        raised."""
        position = int.from_bytes(result, "little")
        future = self.done.get(position)
        if future is not None:
            await asyncio.shield(future)
        elif position in self.failed:
            raise self.failed[position]

    def _partition(self, op: Any) -> Any:
        key = (op.stream_id, op.topic_id, op.partition_id)
        partition = self.shard.partitions.get(key)
        stream = self.shard.meta.state.streams.get(op.stream_id)
        topic = stream.topics.get(op.topic_id) if stream is not None else None
        if partition is None or topic is None or \
                topic.partition_created_at[op.partition_id] != op.created_at:
            raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                            f"partition {op.partition_id} of topic {op.topic_id}")
        return partition

    def _execute(self, op: Op) -> Any:
        partition = self._partition(op)
        if isinstance(op, StoreOffset):
            partition.store_offset(op.kind, op.key, op.offset)
            return None
        if isinstance(op, DeleteOffset):
            if partition.get_offset(op.kind, op.key) is not None:
                partition.delete_offset(op.kind, op.key)
            return None
        key = (op.stream_id, op.topic_id, op.partition_id)
        batch = MessageBatch(op.count, memoryview(op.index), memoryview(bytearray(op.blob)))
        return self.shard.dedup.append(
            key, batch, op.timestamp_us,
            lambda kept: self._store(key, partition, kept, op.timestamp_us))

    def _store(self, key: tuple[int, int, int], partition: Any, batch: MessageBatch,
               timestamp_us: int) -> Any:
        stored = self.stored.get(key, 0)
        self.stored[key] = stored + batch.count
        if stored + batch.count <= partition.next_offset:
            return None  # stored before this start (the log is re-executed)
        return self._append(key, partition, batch, timestamp_us)

    def _append(self, key: tuple[int, int, int], partition: Any, batch: MessageBatch,
                timestamp_us: int) -> Any:
        """Hand ``batch`` to the partition, to be stamped with ``timestamp_us``."""
        if not isinstance(partition.clock, OpClock):
            partition.clock = OpClock(partition.clock)
        partition.clock.stamps.append(timestamp_us)
        return self.shard.append(partition, batch)

    # ---- checkpoints (``partition_state``) ---------------------------------------------

    def snapshot(self) -> bytes:
        queued = [(position, msgspec.msgpack.encode(op)) for position, op in self.queue]
        return encode_state(self.calls, self.stored, queued, self.shard.dedup)

    def restore(self, state: bytes) -> None:
        """Adopt a checkpoint's state; copy the messages it counts that this replica's
        partitions lack before any later op is carried out."""
        decoded = decode_state(state, self.shard.dedup)
        had, self.stored = self.stored, {tuple(k): n for k, n in decoded.stored}
        for position, _ in self.queue:  # covered by the checkpoint (stored or queued)
            self._finish(position, self.done[position], None)
        self.calls = decoded.calls
        self.queue = deque()
        for position, body in decoded.queued:
            self.done.setdefault(position, asyncio.get_running_loop().create_future())
            self.queue.append((position, _op_decoder.decode(body)))
        gaps = {}
        for key, count in self.stored.items():
            partition = self.shard.partitions.get(key)
            have = max(partition.next_offset, had.get(key, 0)) if partition else count
            if count > have:
                gaps[key] = (have, count)
        if gaps:
            self.filling = True
            asyncio.ensure_future(self._fill(gaps))

    async def _fill(self, gaps: dict) -> None:
        try:
            await self.filler.fill(gaps, self._append)
        except Exception:
            log.exception("copying messages after a checkpoint failed; this replica's "
                          "partitions now differ from the group's")
        self.filling = False
        self.drain()


class ReplicatedPartitions:
    """The cluster node's send, poll and offset commands (see the module doc)."""

    def __init__(self, shard: Any, node: Any, layout: GroupLayout,
                 services: dict[int, PartitionService], meta: Any, timeout_s: float) -> None:
        self.shard, self.node, self.layout, self.services = shard, node, layout, services
        self.meta, self.timeout_s = meta, timeout_s
        self.forwarder = Forwarder(node, {"append": self._submit, "offset": self._offset,
                                          "get_offset": self._get_offset, "poll": self._poll,
                                          "delete_offset": self._delete_offset,
                                          "fetch": self._fetch},
                                   self._encode, timeout_s, anywhere={"fetch"})
        for group, service in services.items():
            service.filler = Filler(shard, self._fetch_from_members, group)

    def install(self, dispatcher: Any) -> None:
        handlers = {"send_messages": self.send, "poll_messages": self.poll,
                    "store_consumer_offset": self.store_offset,
                    "get_consumer_offset": self.get_offset,
                    "delete_consumer_offset": self.delete_offset}
        for code, route in list(dispatcher.table.items()):
            if route.spec.name in handlers:
                dispatcher.table[code] = dataclasses.replace(
                    route, handler=handlers[route.spec.name])

    def group_of(self, topic: Any, partition_id: int) -> int:
        return self.layout.group_of(topic.stream_id, topic.id, partition_id,
                                    topic.replication_factor)

    # ---- on the receiving node ------------------------------------------------------

    async def send(self, shard: Any, session: Any, req: Any) -> None:
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        pid = choose_partition(shard, topic, req.partitioning)
        shard.partition(topic, pid)
        req.batch.validate()
        op = Append(self.meta.accepted, topic.stream_id, topic.id, pid,
                    topic.partition_created_at[pid], shard.clock(), req.batch.count,
                    bytes(req.batch.index), bytes(with_ids(req.batch)))
        await self.forwarder.on_primary(self.group_of(topic, pid), "append",
                                        msgspec.msgpack.encode(op))

    async def store_offset(self, shard: Any, session: Any, req: Any) -> None:
        target, _ = offset_target(shard, session, req)
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        op = StoreOffset(self.meta.accepted, topic.stream_id, topic.id, target.partition_id,
                         topic.partition_created_at[target.partition_id], target.kind,
                         target.key, req.offset)
        await self.forwarder.on_primary(self.group_of(topic, target.partition_id), "offset",
                                        msgspec.msgpack.encode(op))
        if target.kind == "groups":
            shard.groups.stored(topic, target.key, target.partition_id, req.offset)

    async def get_offset(self, shard: Any, session: Any, req: Any) -> Any:
        target, _ = offset_target(shard, session, req)
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        pid = target.partition_id
        ask = StoreOffset(self.meta.accepted, topic.stream_id, topic.id, pid,
                          topic.partition_created_at[pid], target.kind, target.key, 0)
        return await self.forwarder.on_primary(self.group_of(topic, pid), "get_offset",
                                               msgspec.msgpack.encode(ask))

    async def delete_offset(self, shard: Any, session: Any, req: Any) -> None:
        target, _ = offset_target(shard, session, req)
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        pid = target.partition_id
        op = DeleteOffset(self.meta.accepted, topic.stream_id, topic.id, pid,
                          topic.partition_created_at[pid], target.kind, target.key)
        await self.forwarder.on_primary(self.group_of(topic, pid), "delete_offset",
                                        msgspec.msgpack.encode(op))

    async def poll(self, shard: Any, session: Any, req: Any) -> Any:
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        target = resolve(shard, session, topic, req.consumer, req.partition_id, advance=True)
        if target.partition_id is None:
            return empty_poll(0, 0)
        pid = target.partition_id
        shard.partition(topic, pid)
        call = Poll(self.meta.accepted, topic.stream_id, topic.id, pid,
                    topic.partition_created_at[pid], target.kind, target.key,
                    int(req.strategy.kind), req.strategy.value, req.count, req.auto_commit)
        result = await self.forwarder.on_primary(self.group_of(topic, pid), "poll",
                                                 msgspec.msgpack.encode(call))
        if isinstance(result, bytes):
            result = _polled_decoder.decode(result)
            payload: Any = result.payload
        else:
            payload = result[1]
            result = Polled(result[0], b"")
        if target.kind == "groups" and result.last_offset >= 0:
            shard.groups.delivered(topic, target.key, pid, result.last_offset,
                                   req.auto_commit)
        return payload

    # ---- on the primary ---------------------------------------------------------------

    async def _submit(self, group: int, body: bytes) -> None:
        try:
            result = await self.node.submit(group, body)
        except ClusterBusy as exc:
            raise IggyError(ErrorCode.TASK_TIMEOUT, str(exc)) from None
        await self.services[group].effect(result)

    async def _offset(self, group: int, body: bytes) -> None:
        """An offset is checked against what the primary stored (every acknowledged send)."""
        op = _op_decoder.decode(body)
        await self.meta.reached(op.meta_base, self.timeout_s)
        partition = self.services[group]._partition(op)
        if partition.messages_count == 0 or op.offset > partition.current_offset:
            raise IggyError(ErrorCode.INVALID_OFFSET,
                            f"offset {op.offset} is past the partition's last offset")
        await self._submit(group, body)

    async def _delete_offset(self, group: int, body: bytes) -> None:
        """Refused (CONSUMER_OFFSET_NOT_FOUND) when the primary stores none, as on a node."""
        op = _op_decoder.decode(body)
        await self.meta.reached(op.meta_base, self.timeout_s)
        partition = self.services[group]._partition(op)
        if partition.get_offset(op.kind, op.key) is None:
            raise IggyError(ErrorCode.CONSUMER_OFFSET_NOT_FOUND, "no stored offset")
        await self._submit(group, body)

    async def _get_offset(self, group: int, body: bytes) -> Any:
        ask = _op_decoder.decode(body)
        await self.meta.reached(ask.meta_base, self.timeout_s)
        partition = self.services[group]._partition(ask)
        stored = partition.get_offset(ask.kind, ask.key)
        if stored is None:
            return None
        return ConsumerOffsetInfo(partition.partition_id, partition.current_offset, stored)

    async def _fetch(self, group: int, body: bytes) -> Any:
        """Stored messages for a replica filling its partition (any member answers)."""
        ask = fetch_decoder.decode(body)
        partition = self.shard.partitions.get(tuple(ask.key))
        if partition is None or partition.next_offset < ask.offset + ask.count:
            raise IggyError(ErrorCode.INVALID_OFFSET, "this replica lacks them too")
        return Parts([within_reply_cap(self.shard, partition,
                                       partition.read_offset(ask.offset, ask.count))])

    async def _fetch_from_members(self, group: int, body: bytes) -> bytes:
        return await self.forwarder.on_any_other(group, "fetch", body)

    async def _poll(self, group: int, body: bytes) -> tuple[int, Any]:
        call = _poll_decoder.decode(body)
        await self.meta.reached(call.meta_base, self.timeout_s)
        partition = self.services[group]._partition(call)
        polled = within_reply_cap(self.shard, partition, partition.poll(
            call.strategy, call.value, call.count, (call.kind, call.key)))
        if polled.count == 0:
            return -1, empty_poll(partition.partition_id, partition.current_offset)
        if call.auto_commit:
            await self._submit(group, msgspec.msgpack.encode(StoreOffset(
                call.meta_base, call.stream_id, call.topic_id, call.partition_id,
                call.created_at, call.kind, call.key, polled.last_offset)))
        prefix = POLL_PREFIX.pack(partition.partition_id, partition.current_offset,
                                  polled.count)
        return polled.last_offset, Parts([prefix, polled])

    @staticmethod
    def _encode(result: Any) -> bytes:
        """A primary's result as the payload of its answer to another node."""
        if isinstance(result, tuple):  # a poll: (last offset, reply)
            return msgspec.msgpack.encode(Polled(result[0], payload_of(result[1])))
        return payload_of(result)
