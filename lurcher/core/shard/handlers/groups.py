"""Consumer group commands: get, list, create, delete, join, leave.

Membership and assignment live in ``core.shard.groups``; this module only resolves the
topic and group and passes the stored group offsets (for cooperative hand-over on join).
"""

from __future__ import annotations

from typing import Any

from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import DeleteConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader, GroupMember
from lurcher.core.wire.validation import wire_name


def group_header(shard: ShardFace, topic, group) -> GroupHeader:
    return GroupHeader(group.id, topic.partitions_count,
                       len(shard.groups.members(topic, group.id)), wire_name(group.name))


def group_details(shard: ShardFace, topic, group) -> GroupDetails:
    members = [GroupMember(m.id, list(m.partitions))
               for m in shard.groups.members(topic, group.id)]
    return GroupDetails(group_header(shard, topic, group), members)


@handles("get_consumer_group")
def get_consumer_group(shard: ShardFace, session: Session, req: GetConsumerGroup) -> Any:
    state = shard.meta.state
    try:
        topic = state.topic(req.stream_id, req.topic_id)
        group = state.group(topic, req.group_id)
    except IggyError:
        return None
    return group_details(shard, topic, group)


@handles("get_consumer_groups")
def get_consumer_groups(shard: ShardFace, session: Session, req: GetConsumerGroups) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    return [group_header(shard, topic, topic.groups[gid]) for gid in sorted(topic.groups)]


@handles("create_consumer_group")
def create_consumer_group(shard: ShardFace, session: Session, req: CreateConsumerGroup) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    if req.name in topic.group_names:
        raise IggyError(ErrorCode.CONSUMER_GROUP_NAME_ALREADY_EXISTS, req.name)
    gid = topic.group_ids.peek()
    shard.meta.record(ev.ConsumerGroupCreated(topic.stream_id, topic.id, gid, req.name))
    return group_details(shard, topic, topic.groups[gid])


@handles("delete_consumer_group")
def delete_consumer_group(shard: ShardFace, session: Session, req: DeleteConsumerGroup) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    group = shard.meta.state.group(topic, req.group_id)
    shard.meta.record(ev.ConsumerGroupDeleted(topic.stream_id, topic.id, group.id))
    shard.groups.drop_group(topic, group.id)
    for partition in shard.topic_partitions(topic):
        partition.forget_offset("groups", group.id)
    return None


@handles("join_consumer_group")
def join_consumer_group(shard: ShardFace, session: Session, req: JoinConsumerGroup) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    group = shard.meta.state.group(topic, req.group_id)
    shard.groups.join(topic, group.id, session.client_id, shard.clock(),
                      committed_offsets(shard, topic, group.id))
    return None


def committed_offsets(shard: ShardFace, topic, group_id: int):
    """``pid -> stored offset of the group on that partition (or None)``."""
    def committed(pid: int):
        partition = shard.partitions.get((topic.stream_id, topic.id, pid))
        return None if partition is None else partition.get_offset("groups", group_id)
    return committed


@handles("leave_consumer_group")
def leave_consumer_group(shard: ShardFace, session: Session, req: LeaveConsumerGroup) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    group = shard.meta.state.group(topic, req.group_id)
    shard.groups.leave(topic, group.id, session.client_id)
    return None
