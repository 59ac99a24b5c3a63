"""Partition lifecycle driven by metadata events.

Every shard observes the metadata events it applies (its own, or those published by the
metadata owner) and opens or drops the partitions it owns (one it cannot open now is opened
at its next use: ``partition_files``; the handlers made its files before the event).
Handlers therefore only record events; the same code path serves one shard or many, at run
time and never during replay (``Shard`` opens what it owns after the replay). The metadata
owner moves deleted directories aside before it records the event (``tombstones``); a shard
dropping a partition closes it and removes whatever is still at its path. A shard where no
handler made a user or token change (another shard, another cluster node) ends the sessions
whose login it ended.
"""

from __future__ import annotations

from typing import Any

from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.users import end_stale_sessions
from lurcher.core.shard.partition_files import open_now_or_later


class PartitionLifecycle:
    def __init__(self, shard: Any) -> None:
        self.shard = shard

    def before(self, event: ev.Event, state: Any) -> None:
        handler = _BEFORE.get(type(event))
        if handler:
            handler(self.shard, event, state)

    def after(self, event: ev.Event, state: Any) -> None:
        handler = _AFTER.get(type(event))
        if handler:
            handler(self.shard, event, state)


def _topic(state: Any, stream_id: int, topic_id: int):
    return state.streams[stream_id].topics[topic_id]


def _open_owned(shard: Any, topic: Any) -> None:
    for pid in range(topic.partitions_count):
        if shard.owns(topic.stream_id, topic.id, pid) and \
                (topic.stream_id, topic.id, pid) not in shard.partitions:
            open_now_or_later(shard, topic, pid)


def _drop_owned(shard: Any, topic: Any, pids: range) -> None:
    for pid in pids:
        if shard.owns(topic.stream_id, topic.id, pid):
            shard.drop_partition(topic.stream_id, topic.id, pid)


def _stream_deleting(shard: Any, e: ev.StreamDeleted, state: Any) -> None:
    for topic in state.streams[e.id].topics.values():
        _drop_owned(shard, topic, range(topic.partitions_count))
    shard.groups.drop_topic(e.id)


def _topic_deleting(shard: Any, e: ev.TopicDeleted, state: Any) -> None:
    topic = _topic(state, e.stream_id, e.id)
    _drop_owned(shard, topic, range(topic.partitions_count))
    shard.groups.drop_topic(e.stream_id, e.id)


def _topic_created(shard: Any, e: ev.TopicCreated, state: Any) -> None:
    _open_owned(shard, _topic(state, e.stream_id, e.id))


def _partitions_created(shard: Any, e: ev.PartitionsCreated, state: Any) -> None:
    topic = _topic(state, e.stream_id, e.topic_id)
    _open_owned(shard, topic)
    shard.groups.rebalance_topic(topic)


def _partitions_deleting(shard: Any, e: ev.PartitionsDeleted, state: Any) -> None:
    topic = _topic(state, e.stream_id, e.topic_id)
    count = topic.partitions_count
    _drop_owned(shard, topic, range(count - e.count, count))


def _partitions_deleted(shard: Any, e: ev.PartitionsDeleted, state: Any) -> None:
    shard.groups.rebalance_topic(_topic(state, e.stream_id, e.topic_id))


def _group_deleted(shard: Any, e: ev.ConsumerGroupDeleted, state: Any) -> None:
    topic = _topic(state, e.stream_id, e.topic_id)
    shard.groups.drop_group(topic, e.id)
    for pid in range(topic.partitions_count):
        partition = shard.partitions.get((e.stream_id, e.topic_id, pid))
        if partition is not None:
            partition.forget_offset("groups", e.id)


def _logins_changed(shard: Any, e: Any, state: Any) -> None:
    """A user deleted or updated (deactivated), or a token deleted: a shard whose handler
    did not make the change ends its sessions whose login no longer holds, as that handler
    does (``users.end_stale_sessions``). That is every shard but a lone server's metadata
    owner: on a cluster node the change arrives committed through the metadata group, on
    every node, including one where no handler ran (on the deciding node its handler's
    sessions are already ended, and the caller, awaiting its reply, is not disconnected)."""
    if not shard.is_metadata_owner or shard.cluster_node is not None:
        end_stale_sessions(shard, e.user_id if isinstance(e, ev.TokenDeleted) else e.id)


_BEFORE = {
    ev.StreamDeleted: _stream_deleting,
    ev.TopicDeleted: _topic_deleting,
    ev.PartitionsDeleted: _partitions_deleting,
}
_AFTER = {
    ev.TopicCreated: _topic_created,
    ev.PartitionsCreated: _partitions_created,
    ev.PartitionsDeleted: _partitions_deleted,
    ev.ConsumerGroupDeleted: _group_deleted,
    ev.UserUpdated: _logins_changed,
    ev.UserDeleted: _logins_changed,
    ev.TokenDeleted: _logins_changed,
}
