"""Consumer group membership (runtime, not persisted): members are connected clients.

Owns, per group: the members (keyed by client id, in join order), the partitions each
member consumes, partitions being handed over ("revocations"), and the last offset delivered
to the group per partition. Stored group offsets live in the partitions, not here.

Assignment follows the 0.8 server:

* Leave, disconnect or a partition-count change: full round-robin rebalance, partition
  ``i`` goes to the ``i % members``-th member in join order.
* Join: cooperative. Unassigned partitions go to idle members; then each over-assigned
  member marks its excess partitions (from the end of its list) as revoking, one per idle
  member. A revoking partition is not handed out by round-robin polls any more (an explicit
  partition id still reaches it) and moves to its target member once the group's stored
  offset has caught up with the last offset delivered from it (or nothing was delivered),
  checked on join and on every offset store, or when it is older than the rebalancing
  timeout (``expire_revocations``). This keeps "each partition consumed by exactly one
  member" true even for clients that commit after processing. A purge of a partition
  empties it and drops its stored offsets: what was delivered from it is forgotten and its
  pending hand-over completes at once (``purged``).

Member ids are 0-based per group: a new member gets the highest current id + 1.
Invariant: every partition ``0..count-1`` of the topic is in exactly one member's
``partitions`` when the group has members (revoking ones stay with their source until moved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lurcher.core.meta.state import TopicMeta
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

GroupKey = tuple[int, int, int]
Committed = Callable[[int], "int | None"]
"""The group's stored offset on a partition id (None when nothing is stored)."""


@dataclass(slots=True)
class Revocation:
    partition_id: int
    target_client_id: int
    target_member_id: int
    created_at_us: int


@dataclass
class Member:
    id: int
    client_id: int
    partitions: list[int] = field(default_factory=list)
    cursor: int = 0
    revoking: list[Revocation] = field(default_factory=list)

    def next_partition(self, advance: bool) -> int | None:
        """The partition to serve next (round-robin over the assigned ones that are not
        being revoked), or None; ``advance`` moves the cursor (polls do, reads don't)."""
        active = self.partitions if not self.revoking else self.active_partitions()
        count = len(active)
        if not count:
            return None
        chosen = active[self.cursor % count]
        if advance:
            self.cursor = (self.cursor + 1) % count
        return chosen

    def active_partitions(self) -> list[int]:
        gone = {r.partition_id for r in self.revoking}
        return [p for p in self.partitions if p not in gone]


@dataclass
class GroupRuntime:
    members: dict[int, Member] = field(default_factory=dict)  # by client id, join order
    last_polled: dict[int, int] = field(default_factory=dict)  # partition -> last offset

    def ordered(self) -> list[Member]:
        return list(self.members.values())

    def full_rebalance(self, partitions_count: int) -> None:
        members = self.ordered()
        for member in members:
            member.partitions, member.revoking = [], []
        for pid in range(partitions_count if members else 0):
            members[pid % len(members)].partitions.append(pid)

    def cooperative_rebalance(self, partitions_count: int, now_us: int) -> None:
        members = self.ordered()
        if not members or not partitions_count:
            return
        assigned = {p for m in members for p in m.partitions}
        unassigned = [p for p in range(partitions_count) if p not in assigned]
        idle = [m for m in members if not m.partitions]
        for i, pid in enumerate(unassigned if idle else ()):
            idle[i % len(idle)].partitions.append(pid)
        self._mark_excess(members, partitions_count, now_us)

    def _mark_excess(self, members: list[Member], partitions_count: int, now_us: int) -> None:
        fair, extra = divmod(partitions_count, len(members))
        targets = {r.target_client_id for m in members for r in m.revoking}
        idle = [m for m in members if not m.partitions and m.client_id not in targets]
        for member in members:
            if not idle:
                return
            active = member.active_partitions()
            allowed = fair + 1 if extra > 0 else fair
            if len(active) > fair:
                extra = max(extra - 1, 0)
            for pid in list(reversed(active))[:max(len(active) - allowed, 0)]:
                if not idle:
                    break
                target = idle.pop(0)
                member.revoking.append(Revocation(pid, target.client_id, target.id, now_us))

    def complete(self, source: Member, revocation: Revocation, partitions_count: int) -> None:
        """Move a revoking partition to its target (full rebalance if the target is gone)."""
        source.revoking.remove(revocation)
        source.partitions.remove(revocation.partition_id)
        target = self.members.get(revocation.target_client_id)
        if target is None or target.id != revocation.target_member_id:
            self.full_rebalance(partitions_count)
            return
        target.partitions.append(revocation.partition_id)

    def completable(self, committed: Committed) -> list[tuple[Member, Revocation]]:
        out = []
        for member in self.ordered():
            for revocation in member.revoking:
                if self.caught_up(revocation.partition_id, committed(revocation.partition_id)):
                    out.append((member, revocation))
        return out

    def caught_up(self, pid: int, stored: int | None) -> bool:
        polled = self.last_polled.get(pid)
        return polled is None or (stored is not None and stored >= polled)


class Groups:
    """Runtime state of every consumer group of a shard."""

    def __init__(self, cooperative: bool = True) -> None:
        self.groups: dict[GroupKey, GroupRuntime] = {}
        # Cooperative hand-over needs every poll and commit of the group in one process;
        # with several shards those run on the partitions' owners, so joins rebalance fully.
        self.cooperative = cooperative

    @staticmethod
    def key(topic: TopicMeta, group_id: int) -> GroupKey:
        return (topic.stream_id, topic.id, group_id)

    def runtime(self, topic: TopicMeta, group_id: int) -> GroupRuntime:
        return self.groups.setdefault(self.key(topic, group_id), GroupRuntime())

    def members(self, topic: TopicMeta, group_id: int) -> list[Member]:
        """Members ordered by member id."""
        group = self.groups.get(self.key(topic, group_id))
        return sorted(group.members.values(), key=lambda m: m.id) if group else []

    def member(self, topic: TopicMeta, group_id: int, client_id: int) -> Member:
        """Raises IggyError CONSUMER_GROUP_MEMBER_NOT_FOUND for a non-member."""
        group = self.groups.get((topic.stream_id, topic.id, group_id))
        member = group.members.get(client_id) if group else None
        if member is None:
            raise IggyError(ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                            f"client {client_id} is not a member of group {group_id}")
        return member

    # -- membership ----------------------------------------------------------------------

    def join(self, topic: TopicMeta, group_id: int, client_id: int, now_us: int,
             committed: Committed) -> None:
        """Add the client (no-op for a member), rebalance cooperatively, then move every
        revoking partition whose stored offset has caught up."""
        group = self.runtime(topic, group_id)
        if client_id not in group.members:
            next_id = max((m.id for m in group.members.values()), default=-1) + 1
            group.members[client_id] = Member(next_id, client_id)
            if not self.cooperative:
                group.full_rebalance(topic.partitions_count)
                return
            group.cooperative_rebalance(topic.partitions_count, now_us)
        for source, revocation in group.completable(committed):
            group.complete(source, revocation, topic.partitions_count)

    def leave(self, topic: TopicMeta, group_id: int, client_id: int) -> None:
        """Raises IggyError CONSUMER_GROUP_MEMBER_NOT_FOUND for a non-member."""
        self.member(topic, group_id, client_id)
        self._remove(self.groups[self.key(topic, group_id)], client_id, topic.partitions_count)

    @staticmethod
    def _remove(group: GroupRuntime, client_id: int, partitions_count: int) -> None:
        member = group.members.pop(client_id)
        for pid in member.partitions:
            group.last_polled.pop(pid, None)
        group.full_rebalance(partitions_count)

    def drop_client(self, client_id: int, topic_of) -> None:
        """Remove the client from every group; ``topic_of(sid, tid)`` gives the TopicMeta."""
        for key in self.joined_by(client_id):
            topic = topic_of(key[0], key[1])
            count = topic.partitions_count if topic is not None else 0
            self._remove(self.groups[key], client_id, count)

    def joined_by(self, client_id: int) -> list[GroupKey]:
        return [key for key, group in self.groups.items() if client_id in group.members]

    # -- partition changes ---------------------------------------------------------------

    def rebalance(self, topic: TopicMeta, group_id: int) -> None:
        group = self.groups.get(self.key(topic, group_id))
        if group is not None:
            group.last_polled.clear()
            group.full_rebalance(topic.partitions_count)

    def rebalance_topic(self, topic: TopicMeta) -> None:
        """After partitions were created or deleted: full rebalance of every group."""
        for (sid, tid, gid) in list(self.groups):
            if (sid, tid) == (topic.stream_id, topic.id):
                self.rebalance(topic, gid)

    def drop_group(self, topic: TopicMeta, group_id: int) -> None:
        self.groups.pop(self.key(topic, group_id), None)

    def drop_topic(self, stream_id: int, topic_id: int | None = None) -> None:
        for key in list(self.groups):
            if key[0] == stream_id and (topic_id is None or key[1] == topic_id):
                del self.groups[key]

    # -- offsets -------------------------------------------------------------------------

    def delivered(self, topic: TopicMeta, group_id: int, partition_id: int,
                  last_offset: int, committed: bool) -> None:
        """A poll handed the group messages up to ``last_offset`` from the partition
        (``committed``: the poll also stored that offset, as auto-commit does)."""
        group = self.groups.get(self.key(topic, group_id))
        if group is not None:
            group.last_polled[partition_id] = last_offset
            if committed:
                self.stored(topic, group_id, partition_id, last_offset)

    def stored(self, topic: TopicMeta, group_id: int, partition_id: int, offset: int) -> None:
        """The group's offset on the partition was stored: complete a revocation it unblocks."""
        group = self.groups.get(self.key(topic, group_id))
        if group is not None and group.caught_up(partition_id, offset):
            self._complete_revocation_of(group, topic, partition_id)

    def purged(self, topic: TopicMeta, partition_id: int) -> None:
        """The partition was purged (no message, no stored offset left): every group forgets
        what it delivered from it, and a hand-over of it completes at once (nothing is left
        for its member to commit, so it would otherwise wait for the rebalancing timeout)."""
        for (sid, tid, _gid), group in self.groups.items():
            if (sid, tid) == (topic.stream_id, topic.id):
                group.last_polled.pop(partition_id, None)
                self._complete_revocation_of(group, topic, partition_id)

    @staticmethod
    def _complete_revocation_of(group: GroupRuntime, topic: TopicMeta,
                                partition_id: int) -> None:
        for member in group.ordered():
            for revocation in member.revoking:
                if revocation.partition_id == partition_id:
                    group.complete(member, revocation, topic.partitions_count)
                    return

    def expire_revocations(self, topic_of, now_us: int, timeout_us: int) -> int:
        """Complete revocations older than ``timeout_us``; returns how many moved."""
        moved = 0
        for (sid, tid, _gid), group in list(self.groups.items()):
            topic = topic_of(sid, tid)
            for member in group.ordered():
                for revocation in list(member.revoking):
                    if (topic is not None and revocation in member.revoking
                            and now_us - revocation.created_at_us >= timeout_us):
                        group.complete(member, revocation, topic.partitions_count)
                        moved += 1
        return moved
