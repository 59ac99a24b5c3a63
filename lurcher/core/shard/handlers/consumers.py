"""Who a poll or an offset command is for: a plain consumer or a consumer group member.

Plain consumers are keyed by their numeric id, or xxHash32 (seed 0) of their name; groups
by group id. A group request needs the client to be a member (CONSUMER_GROUP_MEMBER_NOT_FOUND
otherwise); without an explicit partition the member's partitions are used round-robin.
One exception: an HTTP session (which can never join a group) naming an explicit partition
reads the group's offset there without membership; the REST API only builds such a request
for GET consumer-offsets with ``consumer_kind=consumer_group`` (the web console's lag view).
"""

from __future__ import annotations

from dataclasses import dataclass

import xxhash

from lurcher.auth.session import TRANSPORT_HTTP
from lurcher.core.log.offsets import OffsetKind
from lurcher.core.meta.state import TopicMeta
from lurcher.core.wire.values.consumer import Consumer


@dataclass(frozen=True)
class Target:
    """Offsets of (kind, key) on ``partition_id``; ``partition_id`` None = nothing assigned."""

    kind: OffsetKind
    key: int
    partition_id: int | None


def consumer_key(consumer: Consumer) -> int:
    value = consumer.id.value
    return value if isinstance(value, int) else xxhash.xxh32_intdigest(value.encode())


def resolve(shard, session, topic: TopicMeta, consumer: Consumer, partition_id: int | None,
            advance: bool) -> Target:
    """The offset owner and partition for a request. Raises IggyError for unknown groups or
    non-members. ``advance`` moves a member's round-robin cursor (polls do, reads don't)."""
    if not consumer.is_group:
        return Target("consumers", consumer_key(consumer), 0 if partition_id is None else partition_id)
    group = shard.meta.state.group(topic, consumer.id)
    if partition_id is not None and session.transport == TRANSPORT_HTTP:
        return Target("groups", group.id, partition_id)
    member = shard.groups.member(topic, group.id, session.client_id)
    if partition_id is not None:
        owned = partition_id in member.partitions
        return Target("groups", group.id, partition_id if owned else None)
    return Target("groups", group.id, member.next_partition(advance))
