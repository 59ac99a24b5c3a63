"""Counters of the partitions a cluster node does not hold, asked of their groups' primaries.

A topic whose ``replication_factor`` is below the node count has partitions that some nodes
hold no replica of (shard 0 of a cluster node opens every partition; those of groups it is
not a member of stay empty). GetStream(s), GetTopic(s) and GetStats answer counters
(messages, size, segments, current offset) for every partition wherever they are asked:
before one of them runs, the node asks the primary of each group it is not a member of for
the counters of the partitions it shows (``refresh``: one ``stats`` call per group, all at
once), and the views read them (``get``, ``rows``) instead of the node's empty copies. A
shard of the node that forwards (``system.sharding.shards`` > 1) gets them with shard 0's
own counters (``Cluster._on_stats``).

Invariants: a counter is used only for the partition generation it was read from (its
``created_at``); the counters kept are those of partitions the metadata still has (pruned
at each refresh), so memory is bounded by the partition count. A group's primary that does
not answer within ``STATS_WAIT_S`` (no quorum, a view change) or fails leaves its
partitions' last counters seen here (the node's empty copy where none were): the command is
answered anyway. Such a group is not asked again for ``RETRY_AFTER_S`` (a dashboard polling
GetStats does not wait a second each time); its failure is logged once, and so is its
recovery. Concurrent refreshes share one call per group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

import msgspec

from lurcher.core.shard.peers import PartitionStats

log = logging.getLogger(__name__)

STATS_WAIT_S = 1.0  # at most this long for a group's primary, then the last known counters
RETRY_AFTER_S = 5.0  # a group that did not answer is not asked again before this
Key = tuple[int, int, int]
_keys_decoder = msgspec.msgpack.Decoder(list[tuple[int, int, int]])
_rows_decoder = msgspec.msgpack.Decoder(list[PartitionStats])


class PeerStats:
    """The node's counters of partitions held only by other nodes (see the module doc)."""

    def __init__(self, shard: Any, forwarder: Any, group_of: Any, member_of: Any) -> None:
        """``forwarder.on_primary(group, kind, body)`` runs a call on a group's primary;
        ``group_of(topic, partition_id)``: the partition's group; ``member_of(group)``:
        whether this node is one of its replicas."""
        self.shard, self.forwarder = shard, forwarder
        self.group_of, self.member_of = group_of, member_of
        self.known: dict[Key, PartitionStats] = {}
        self.silent_until: dict[int, float] = {}  # group -> when to ask it again
        self.asking: dict[int, asyncio.Future] = {}  # group -> its call under way

    def get(self, key: Key, created_at: int) -> PartitionStats | None:
        """The counters of partition ``key`` of generation ``created_at``, if seen."""
        found = self.known.get(key)
        return found if found is not None and found.created_at == created_at else None

    def rows(self) -> dict[Key, PartitionStats]:
        """The known counters of partitions held elsewhere that the metadata has (for
        GetStats: they stand for this node's empty copies of those partitions)."""
        state = self.shard.meta.state
        return {key: row for key, row in self.known.items() if _exists(state, row)}

    async def refresh(self, topics: Iterable[Any]) -> None:
        """Ask for the counters of ``topics``' partitions held elsewhere. Never raises."""
        self.known = self.rows()
        wanted: dict[int, list[Key]] = {}
        for topic in topics:
            for pid in range(topic.partitions_count):
                group = self.group_of(topic, pid)
                if not self.member_of(group):
                    wanted.setdefault(group, []).append((topic.stream_id, topic.id, pid))
        now = asyncio.get_running_loop().time()
        calls = [self._ask_once(group, keys) for group, keys in wanted.items()
                 if self.silent_until.get(group, 0.0) <= now]
        if calls:
            await asyncio.gather(*calls)

    async def _ask_once(self, group: int, keys: list[Key]) -> None:
        """``_ask``, or wait for the call to ``group`` already under way (it may ask for
        other keys: a command then shows these as last seen)."""
        running = self.asking.get(group)
        if running is None:
            running = self.asking[group] = asyncio.ensure_future(self._ask(group, keys))
            running.add_done_callback(lambda _: self.asking.pop(group, None))
        await asyncio.shield(running)

    async def _ask(self, group: int, keys: list[Key]) -> None:
        try:
            answer = await asyncio.wait_for(self.forwarder.on_primary(
                group, "stats", msgspec.msgpack.encode(keys)), STATS_WAIT_S)
            rows = _rows_decoder.decode(answer)
        except Exception as exc:  # noqa: BLE001 - any failure: the last counters seen stay
            if group not in self.silent_until:
                log.warning("partition group %d did not report its partitions' counters "
                            "(%s); showing the last seen here until it does (asked again "
                            "every %.0f s)", group, str(exc) or type(exc).__name__,
                            RETRY_AFTER_S)
            self.silent_until[group] = asyncio.get_running_loop().time() + RETRY_AFTER_S
            return
        if self.silent_until.pop(group, None) is not None:
            log.info("partition group %d reports its partitions' counters again", group)
        for row in rows:
            self.known[(row.stream_id, row.topic_id, row.partition_id)] = row


def stats_of_held(shard: Any, body: bytes) -> bytes:
    """The answer to a ``stats`` call: the counters of the asked partitions held here."""
    rows = []
    for key in _keys_decoder.decode(body):
        partition = shard.partitions.get(tuple(key))
        if partition is not None:
            rows.append(PartitionStats(*key, partition.created_at, partition.segments_count,
                                       partition.current_offset, partition.size_bytes,
                                       partition.messages_count))
    return msgspec.msgpack.encode(rows)


def _exists(state: Any, row: PartitionStats) -> bool:
    stream = state.streams.get(row.stream_id)
    topic = stream.topics.get(row.topic_id) if stream is not None else None
    return topic is not None and row.partition_id < topic.partitions_count and \
        topic.partition_created_at[row.partition_id] == row.created_at
