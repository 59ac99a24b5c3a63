"""Partitions replicated through their replication groups: sends, polls, consumer offsets.

Each partition belongs to one partition group (``partition_groups``: fixed by the node count,
the ids and the topic's ``replication_factor``); its replicas are the group's members.

Writes are ops of the group, executed on every replica in commit order (``PartitionService``):
- ``Append``: one whole send batch (never one op per message; one Prepare carries up to
  ``max_batch`` of them). The receiving node validates it, fills ids left 0 with random ids
  and stamps its clock (``timestamp_us``), so every replica stores identical bytes: at
  execution the batch carries the op's timestamp (``MessageBatch.stamp_us``; the batch
  timestamp is ``max(op timestamp, last + 1)``, the same everywhere), deduplication runs with
  the op's timestamp as "now" on the same history, so it drops the same messages everywhere.
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

Restarts: a replica re-executes its group's committed log from its last checkpoint; an
``Append`` whose messages the partition log already holds (counted per partition since the
start) is not stored again (deduplication still sees it). Checkpoints (``partition_state``)
bound each group's log; a replica adopting one copies the messages it lacks from another
replica. A purge (of a stream or topic) is one ``PurgePartition`` op through each of its
partitions' groups, acknowledged once every one is committed (``partition_service``: every
replica empties the partition at the same point of the group's order, and tells its
consumer groups, as a single node's purge does: what they delivered from it is forgotten
and its pending hand-over completes; the receiving node tells its own too). A DeleteSegments is
decided on the partition's primary (the oldest segments it may delete there, as on a node)
and replicated as ``DeleteSegmentsBelow``, the first offset kept: every replica deletes its
sealed segments wholly below it at the same point of the group's order, so every node serves
from the same first offset, also after a fail-over; it is answered once committed and done
on the primary. Segment deletion by retention stays node-local (offsets are unaffected).

Counters: GetStream(s), GetTopic(s) and GetStats first ask the primaries of the groups this
node is not a member of for the counters of their partitions (``peer_stats``).

Modules: ``partition_ops`` (the values), ``partition_service`` (execution on each replica),
``partition_state`` (checkpoints, filling), ``forwarding`` (calls to the primary),
``peer_stats`` (counters held elsewhere); this module installs the commands.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from typing import Any

import msgspec

from lurcher.auth.permissions import recheck, require_login
from lurcher.cluster.forwarding import Forwarder
from lurcher.cluster.host import ClusterBusy
from lurcher.cluster.partition_groups import GroupLayout
from lurcher.cluster.partition_ops import (
    Append, DeleteOffset, DeleteOldest, DeleteSegmentsBelow, Poll, Polled, PurgePartition,
    StoreOffset, delete_oldest_decoder, op_decoder, poll_decoder, polled_decoder, with_ids)
from lurcher.cluster.partition_service import PartitionService, purges_of
from lurcher.cluster.partition_state import Filler, fetch_decoder
from lurcher.cluster.peer_stats import PeerStats, stats_of_held
from lurcher.core.shard.handlers.offsets import check_storable, offset_target, \
    read_offset_target
from lurcher.core.shard.handlers.messages import (POLL_PREFIX, empty_poll, read_ready,
                                                 within_reply_cap)
from lurcher.core.shard.peers import SHOWING_COUNTERS
from lurcher.core.shard.placement import choose_partition, resolve
from lurcher.core.shard.reply import Parts, payload_bytes
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo

log = logging.getLogger(__name__)


def _shown_topics(name: str, state: Any, req: Any) -> list[Any]:
    """The topics whose partitions command ``name`` (one of ``SHOWING_COUNTERS``) shows;
    none when what it names is not there (the command itself answers that)."""
    if name in ("get_streams", "get_stats"):
        return list(state.topics())
    try:
        if name == "get_topic":
            return [state.topic(req.stream_id, req.topic_id)]
        return list(state.stream(req.stream_id).topics.values())
    except IggyError:
        return []


class ReplicatedPartitions:
    """The cluster node's send, poll and offset commands (see the module doc)."""

    def __init__(self, shard: Any, node: Any, layout: GroupLayout,
                 services: dict[int, PartitionService], meta: Any, timeout_s: float) -> None:
        self.shard, self.node, self.layout, self.services = shard, node, layout, services
        self.meta, self.timeout_s = meta, timeout_s
        # per partition, the offset of the last fill refused for retention that was logged:
        # an asker retries every few tenths of a second while it waits for its peers
        self.refused_fills: dict[tuple[int, int, int], int] = {}
        self.forwarder = Forwarder(node, {"append": self._submit, "offset": self._offset,
                                          "get_offset": self._get_offset, "poll": self._poll,
                                          "delete_offset": self._delete_offset,
                                          "purge": self._submit,
                                          "delete_segments": self._delete_segments,
                                          "fetch": self._fetch,
                                          "first_kept": self._first_kept,
                                          "stats": self._stats},
                                   self._encode, timeout_s, anywhere={"fetch", "first_kept"})
        self.peer_stats = shard.peer_stats = PeerStats(
            shard, self.forwarder, self.group_of, lambda group: group in services)
        for group, service in services.items():
            service.filler = Filler(shard, self._fetch_from_members, group,
                                    self._first_kept_by_others)
        node.catching_up = lambda group: group in services and services[group].filling

    def install(self, dispatcher: Any) -> None:
        handlers = {"send_messages": self.send, "poll_messages": self.poll,
                    "store_consumer_offset": self.store_offset,
                    "get_consumer_offset": self.get_offset,
                    "delete_consumer_offset": self.delete_offset,
                    "purge_stream": self.purge_stream, "purge_topic": self.purge_topic,
                    "delete_segments": self.delete_segments}
        for code, route in list(dispatcher.table.items()):
            if route.spec.name in handlers:
                dispatcher.table[code] = dataclasses.replace(
                    route, handler=handlers[route.spec.name])
            elif route.spec.name in SHOWING_COUNTERS:
                dispatcher.table[code] = dataclasses.replace(route, handler=self._counting(
                    route.spec.name, route.handler, route.permission))

    def _counting(self, name: str, handler: Any, permission: str | None) -> Any:
        """``handler`` (a command showing partition counters) run once the counters of the
        partitions it shows that other nodes hold are refreshed (``peer_stats``); the
        session's login and ``permission`` are checked again after that wait."""
        async def run(shard: Any, session: Any, req: Any) -> Any:
            await self.peer_stats.refresh(_shown_topics(name, shard.meta.state, req))
            if permission:
                recheck(shard.meta.state, session, permission, req)
            else:
                require_login(shard.meta.state, session)
            result = handler(shard, session, req)
            return await result if inspect.isawaitable(result) else result
        return run

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
                    req.batch.index, with_ids(req.batch))
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
        found = read_offset_target(shard, req)
        if found is None:
            return None
        target, _ = found
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

    async def purge_stream(self, shard: Any, session: Any, req: Any) -> None:
        stream = shard.meta.state.stream(req.stream_id)
        await self._purge([t for _, t in sorted(stream.topics.items())])

    async def purge_topic(self, shard: Any, session: Any, req: Any) -> None:
        await self._purge([shard.meta.state.topic(req.stream_id, req.topic_id)])

    async def _purge(self, topics: list[Any]) -> None:
        """One ``PurgePartition`` op through each partition's group, all at once; then this
        node's consumer groups are told of each partition it holds no replica of (a
        replica tells them when it executes the op: ``PartitionService``)."""
        await asyncio.gather(*(self.forwarder.on_primary(
            self.group_of(topic, pid), "purge", msgspec.msgpack.encode(PurgePartition(
                self.meta.accepted, topic.stream_id, topic.id, pid,
                topic.partition_created_at[pid])))
            for topic in topics for pid in range(topic.partitions_count)))
        for topic in topics:
            for pid in range(topic.partitions_count):
                if self.group_of(topic, pid) not in self.services:
                    self.shard.partition_purged(topic.stream_id, topic.id, pid)

    async def delete_segments(self, shard: Any, session: Any, req: Any) -> None:
        """Decided on the partition's primary (``_delete_segments``), answered once the
        group committed it and the primary deleted them."""
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        pid = req.partition_id
        shard.partition(topic, pid)
        call = DeleteOldest(self.meta.accepted, topic.stream_id, topic.id, pid,
                            topic.partition_created_at[pid], req.segments_count)
        await self.forwarder.on_primary(self.group_of(topic, pid), "delete_segments",
                                        msgspec.msgpack.encode(call))

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
            result = polled_decoder.decode(result)
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

    async def _current(self, group: int, call: Any) -> Any:
        """The partition ``call`` names, on this primary, once this node applied the
        metadata ``call`` was decided on and the partition holds every op the group
        executed before it (a new primary may still be filling it, or holding ops for
        metadata it has not applied): never an older state read as current. Raises
        PARTITION_NOT_FOUND, TASK_TIMEOUT (not there within ``timeout_s``)."""
        if not await self.meta.reached(call.meta_base, self.timeout_s):
            raise IggyError(ErrorCode.TASK_TIMEOUT, "this primary has not applied the "
                            "metadata the call was made on")
        service = self.services[group]
        key = (call.stream_id, call.topic_id, call.partition_id)
        if not await service.settled(key, self.timeout_s):
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"partition {key} is still catching up "
                            f"on this primary")
        return service._partition(call)

    async def _offset(self, group: int, body: bytes) -> None:
        """An offset is checked against what the primary stored (every acknowledged send)."""
        op = op_decoder.decode(body)
        partition = await self._current(group, op)
        check_storable(partition, op.offset)
        await self._submit(group, body)

    async def _delete_offset(self, group: int, body: bytes) -> None:
        """Refused (CONSUMER_OFFSET_NOT_FOUND) when the primary stores none, as on a node."""
        op = op_decoder.decode(body)
        partition = await self._current(group, op)
        if partition.get_offset(op.kind, op.key) is None:
            raise IggyError(ErrorCode.CONSUMER_OFFSET_NOT_FOUND, "no stored offset")
        await self._submit(group, body)

    async def _delete_segments(self, group: int, body: bytes) -> None:
        """The oldest segments a DeleteSegments names, as this primary holds them (sealed,
        none past the lowest stored consumer offset, as on a node), become one op: delete
        the segments wholly below the first offset kept here, executed by every replica in
        the group's order. Nothing deletable: nothing to replicate."""
        call = delete_oldest_decoder.decode(body)
        partition = await self._current(group, call)
        below = partition.first_kept_after(call.count, partition.min_stored_offset())
        if below > partition.first_offset:
            await self._submit(group, msgspec.msgpack.encode(DeleteSegmentsBelow(
                call.meta_base, call.stream_id, call.topic_id, call.partition_id,
                call.created_at, below)))

    async def _get_offset(self, group: int, body: bytes) -> Any:
        ask = op_decoder.decode(body)
        partition = await self._current(group, ask)
        stored = partition.get_offset(ask.kind, ask.key)
        if stored is None:
            return None
        return ConsumerOffsetInfo(partition.partition_id, partition.current_offset, stored)

    async def _fetch(self, group: int, body: bytes) -> Any:
        """Stored messages for a replica filling its partition (any member answers, from the
        same partition generation only, once it executed the ops storing them)."""
        ask = fetch_decoder.decode(body)
        key, service = tuple(ask.key), self.services[group]
        partition, end = self.shard.partitions.get(key), ask.offset + ask.count
        if partition is None or partition.next_offset < end or service.stored.get(key, 0) < end \
                or service.generation(key) != (ask.created_at, ask.purges) \
                or purges_of(partition) != ask.purges:
            raise IggyError(ErrorCode.INVALID_OFFSET, "this replica lacks them too")
        if ask.offset < partition.first_offset:
            logged, self.refused_fills[key] = self.refused_fills.get(key), ask.offset
            (log.debug if logged == ask.offset else log.warning)(
                "group %d: cannot serve a fill of partition %s from offset %d: retention "
                "deleted it here (first kept offset %d)", group, key, ask.offset,
                partition.first_offset)
            raise IggyError(ErrorCode.INVALID_OFFSET, f"offsets from {ask.offset} were "
                            f"deleted here (first kept {partition.first_offset})")
        polled = within_reply_cap(self.shard, partition,
                                  lambda: partition.read_offset(ask.offset, ask.count))
        await read_ready(partition, polled)
        return Parts([polled])

    async def _stats(self, group: int, body: bytes) -> bytes:
        """Counters of the asked partitions of ``group`` (run on its primary)."""
        return stats_of_held(self.shard, body)

    async def _first_kept(self, group: int, body: bytes) -> bytes:
        """The first offset this replica keeps of a fill's partition (the same generation
        only, as ``_fetch``), 8 bytes little-endian: everything below is deleted here."""
        ask = fetch_decoder.decode(body)
        key, service = tuple(ask.key), self.services[group]
        partition = self.shard.partitions.get(key)
        if partition is None or service.generation(key) != (ask.created_at, ask.purges) \
                or purges_of(partition) != ask.purges:
            raise IggyError(ErrorCode.INVALID_OFFSET, "not the same partition here")
        return partition.first_offset.to_bytes(8, "little")

    async def _first_kept_by_others(self, group: int, body: bytes) -> int | None:
        """The lowest of the other members' ``_first_kept`` (None unless each answered)."""
        answers = await self.forwarder.on_each_other(group, "first_kept", body)
        return None if not answers else min(int.from_bytes(a, "little") for a in answers)

    async def _fetch_from_members(self, group: int, body: bytes) -> bytes:
        return await self.forwarder.on_any_other(group, "fetch", body)

    async def _poll(self, group: int, body: bytes) -> tuple[int, Any]:
        call = poll_decoder.decode(body)
        partition = await self._current(group, call)
        polled = within_reply_cap(self.shard, partition, lambda: partition.poll(
            call.strategy, call.value, call.count, (call.kind, call.key)))
        if polled.count == 0:
            return -1, empty_poll(partition.partition_id, partition.current_offset)
        await read_ready(partition, polled)
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
            return msgspec.msgpack.encode(Polled(result[0], payload_bytes(result[1])))
        return payload_bytes(result)
