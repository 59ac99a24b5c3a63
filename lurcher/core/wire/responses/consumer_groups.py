"""Consumer-group responses: ``GroupHeader`` (13 + name bytes), ``GroupMember`` (id,
partitions_count, partition ids) and ``GroupDetails`` (header + exactly ``members_count``
members). Writers derive the counts from the lists. CreateConsumerGroup answers a header
with members_count 0, which clients decode as GroupDetails; GetConsumerGroups answers
concatenated headers.
"""

from __future__ import annotations

from typing import Self

import numpy as np

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct


class GroupHeader(WireStruct, frozen=True):
    id: int
    partitions_count: int
    members_count: int
    name: str

    def write(self, w: Writer) -> None:
        w.u32(self.id).u32(self.partitions_count).u32(self.members_count).name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("group id"), r.u32("partitions_count"), r.u32("members_count"),
                   r.name("group name"))


class GroupMember(WireStruct, frozen=True):
    id: int
    partitions: list[int]

    def write(self, w: Writer) -> None:
        w.u32(self.id).u32(len(self.partitions))
        w.raw(np.asarray(self.partitions, dtype="<u4").tobytes())

    @classmethod
    def read(cls, r: Reader) -> Self:
        member_id = r.u32("member id")
        count = r.u32("member partitions_count")
        raw = r.view(4 * count, "member partitions")
        return cls(member_id, np.frombuffer(raw, dtype="<u4").tolist())


class GroupDetails(WireStruct, frozen=True):
    header: GroupHeader
    members: list[GroupMember] = []

    def write(self, w: Writer) -> None:
        h = self.header
        GroupHeader(h.id, h.partitions_count, len(self.members), h.name).write(w)
        for member in self.members:
            member.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        header = GroupHeader.read(r)
        return cls(header, [GroupMember.read(r) for _ in range(header.members_count)])
