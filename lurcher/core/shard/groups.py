"""Consumer group membership (runtime, not persisted): members are connected clients.

Partitions are spread round-robin over the members ordered by member id: partition ``i``
goes to member ``i % members``. Every join, leave, disconnect or partition-count change
rebalances the whole group, so each partition has exactly one member at a time. Member
ids are 0-based per group with slab reuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lurcher.core.meta.slab import IdSlab
from lurcher.core.meta.state import TopicMeta
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

GroupKey = tuple[int, int, int]


@dataclass
class Member:
    id: int
    client_id: int
    partitions: list[int] = field(default_factory=list)
    cursor: int = 0

    def next_partition(self, advance: bool) -> int | None:
        """The partition to serve next (round-robin over the assigned ones), or None."""
        if not self.partitions:
            return None
        chosen = self.partitions[self.cursor % len(self.partitions)]
        if advance:
            self.cursor = (self.cursor + 1) % len(self.partitions)
        return chosen


@dataclass
class GroupRuntime:
    members: dict[int, Member] = field(default_factory=dict)  # by client id
    member_ids: IdSlab = field(default_factory=IdSlab)


class Groups:
    def __init__(self) -> None:
        self.groups: dict[GroupKey, GroupRuntime] = {}

    def runtime(self, topic: TopicMeta, group_id: int) -> GroupRuntime:
        return self.groups.setdefault((topic.stream_id, topic.id, group_id), GroupRuntime())

    def members(self, topic: TopicMeta, group_id: int) -> list[Member]:
        group = self.groups.get((topic.stream_id, topic.id, group_id))
        return sorted(group.members.values(), key=lambda m: m.id) if group else []

    def member(self, topic: TopicMeta, group_id: int, client_id: int) -> Member:
        """Raises IggyError CONSUMER_GROUP_MEMBER_NOT_FOUND for a non-member."""
        group = self.groups.get((topic.stream_id, topic.id, group_id))
        member = group.members.get(client_id) if group else None
        if member is None:
            raise IggyError(ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                            f"client {client_id} is not a member of group {group_id}")
        return member

    def join(self, topic: TopicMeta, group_id: int, client_id: int) -> None:
        group = self.runtime(topic, group_id)
        if client_id not in group.members:
            group.members[client_id] = Member(group.member_ids.take(), client_id)
            self.rebalance(topic, group_id)

    def leave(self, topic: TopicMeta, group_id: int, client_id: int) -> None:
        """Raises IggyError CONSUMER_GROUP_MEMBER_NOT_FOUND for a non-member."""
        member = self.member(topic, group_id, client_id)
        group = self.groups[(topic.stream_id, topic.id, group_id)]
        del group.members[client_id]
        group.member_ids.free(member.id)
        self.rebalance(topic, group_id)

    def rebalance(self, topic: TopicMeta, group_id: int) -> None:
        members = self.members(topic, group_id)
        for member in members:
            member.partitions, member.cursor = [], 0
        for pid in range(topic.partitions_count):
            if members:
                members[pid % len(members)].partitions.append(pid)

    def rebalance_topic(self, topic: TopicMeta) -> None:
        for (sid, tid, gid) in list(self.groups):
            if (sid, tid) == (topic.stream_id, topic.id):
                self.rebalance(topic, gid)

    def drop_group(self, topic: TopicMeta, group_id: int) -> None:
        self.groups.pop((topic.stream_id, topic.id, group_id), None)

    def drop_topic(self, stream_id: int, topic_id: int | None = None) -> None:
        for key in list(self.groups):
            if key[0] == stream_id and (topic_id is None or key[1] == topic_id):
                del self.groups[key]

    def joined_by(self, client_id: int) -> list[GroupKey]:
        return [key for key, group in self.groups.items() if client_id in group.members]

    def drop_client(self, client_id: int, topic_of) -> None:
        """Remove the client from every group; ``topic_of(sid, tid)`` gives the TopicMeta."""
        for key in self.joined_by(client_id):
            topic = topic_of(key[0], key[1])
            group = self.groups[key]
            member = group.members.pop(client_id)
            group.member_ids.free(member.id)
            if topic is not None:
                self.rebalance(topic, key[2])
