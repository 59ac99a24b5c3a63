"""Topic responses: ``TopicHeader`` (51 + name bytes), ``PartitionInfo`` (40 bytes) and
``TopicDetails`` (header + exactly ``partitions_count`` partitions).

The 0.8 SDK rejects a TopicDetails whose count differs from the entries that follow, so
``TopicDetails.write`` derives the count from the list. GetTopics answers concatenated headers.
"""

from __future__ import annotations

import struct
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct

PARTITION_INFO = struct.Struct("<IQIQQQ")
assert PARTITION_INFO.size == 40


class TopicHeader(WireStruct, frozen=True):
    id: int
    created_at: int
    partitions_count: int
    message_expiry_us: int
    compression: int
    max_topic_size_bytes: int
    replication_factor: int
    size_bytes: int
    messages_count: int
    name: str

    def write(self, w: Writer) -> None:
        w.u32(self.id).u64(self.created_at).u32(self.partitions_count)
        w.u64(self.message_expiry_us).u8(self.compression).u64(self.max_topic_size_bytes)
        w.u8(self.replication_factor).u64(self.size_bytes).u64(self.messages_count)
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("topic id"), r.u64("created_at"), r.u32("partitions_count"),
                   r.u64("message_expiry"), r.u8("compression"), r.u64("max_topic_size"),
                   r.u8("replication_factor"), r.u64("size_bytes"), r.u64("messages_count"),
                   r.name("topic name"))


class PartitionInfo(WireStruct, frozen=True):
    id: int
    created_at: int
    segments_count: int
    current_offset: int
    size_bytes: int
    messages_count: int

    def write(self, w: Writer) -> None:
        w.raw(PARTITION_INFO.pack(self.id, self.created_at, self.segments_count,
                                  self.current_offset, self.size_bytes, self.messages_count))

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(*PARTITION_INFO.unpack_from(r.buf, r.need(PARTITION_INFO.size, "partition")))


class TopicDetails(WireStruct, frozen=True):
    header: TopicHeader
    partitions: list[PartitionInfo]

    def write(self, w: Writer) -> None:
        h = self.header
        TopicHeader(h.id, h.created_at, len(self.partitions), h.message_expiry_us,
                    h.compression, h.max_topic_size_bytes, h.replication_factor,
                    h.size_bytes, h.messages_count, h.name).write(w)
        for partition in self.partitions:
            partition.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        header = TopicHeader.read(r)
        return cls(header, [PartitionInfo.read(r) for _ in range(header.partitions_count)])
