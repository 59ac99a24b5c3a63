"""Placement: which partition a send goes to, and whose offsets on which partition a poll
or an offset command uses (a plain consumer or a consumer group member). Used by the
handlers and by the router (``routing``) alike; it never touches partitions' data.

Sends: an explicit partition id as given, a messages key by xxHash32 of the key modulo the
partition count, balanced round-robin per topic (``shard.balanced_counters``).

Plain consumers are keyed by their numeric id, or xxHash32 (seed 0) of their name; groups
by group id. A group poll, offset store or offset delete needs the client to be a member
(CONSUMER_GROUP_MEMBER_NOT_FOUND otherwise); without an explicit partition the member's
partitions are used round-robin. Reading a stored offset (``read_target``) needs no
membership, as in Iggy 0.8: a group's offsets are the group's, so any client (an HTTP one,
which can never join, too) reads them, on the partition given or else partition 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import xxhash

from lurcher.core.log.offsets import OffsetKind
from lurcher.core.meta.state import TopicMeta
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partitioning import Partitioning, PartitioningKind


@dataclass(frozen=True)
class Target:
    """Offsets of (kind, key) on ``partition_id``; ``partition_id`` None = nothing assigned."""

    kind: OffsetKind
    key: int
    partition_id: int | None


def consumer_key(consumer: Consumer) -> int:
    value = consumer.id.value
    return value if isinstance(value, int) else xxhash.xxh32_intdigest(value.encode())


def choose_partition(shard: Any, topic: TopicMeta, partitioning: Partitioning) -> int:
    """Partition id for a send (wire §4.4). Raises IggyError NO_PARTITIONS."""
    count = topic.partitions_count
    if count == 0:
        raise IggyError(ErrorCode.NO_PARTITIONS, f"topic {topic.id} has no partitions")
    kind = partitioning.kind
    if kind == PartitioningKind.PARTITION_ID:
        return partitioning.partition_id
    if kind == PartitioningKind.MESSAGES_KEY:
        return xxhash.xxh32_intdigest(partitioning.value) % count
    key = (topic.stream_id, topic.id)
    chosen = shard.balanced_counters.get(key, -1) + 1
    shard.balanced_counters[key] = chosen % count
    return chosen % count


def read_target(shard: Any, topic: TopicMeta, consumer: Consumer,
                partition_id: int | None) -> Target:
    """Whose stored offset a GetConsumerOffset reads, with no membership check: a plain
    consumer's, or a group's, on ``partition_id`` or else partition 0 (Iggy 0.8). Also every
    plain consumer's target. Raises IggyError for an unknown group."""
    partition = 0 if partition_id is None else partition_id
    if not consumer.is_group:
        return Target("consumers", consumer_key(consumer), partition)
    return Target("groups", shard.meta.state.group(topic, consumer.id).id, partition)


def resolve(shard: Any, session: Any, topic: TopicMeta, consumer: Consumer,
            partition_id: int | None, advance: bool) -> Target:
    """The offset owner and partition for a poll or an offset store or delete. Raises
    IggyError for unknown groups or non-members. ``advance`` moves a member's round-robin
    cursor (polls do, offset commands don't)."""
    if not consumer.is_group:
        return read_target(shard, topic, consumer, partition_id)
    group = shard.meta.state.group(topic, consumer.id)
    member = shard.groups.member(topic, group.id, session.client_id)
    if partition_id is not None:
        owned = partition_id in member.partitions
        return Target("groups", group.id, partition_id if owned else None)
    return Target("groups", group.id, member.next_partition(advance))
