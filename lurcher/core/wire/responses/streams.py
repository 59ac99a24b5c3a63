"""Stream responses: ``StreamHeader`` (33 + name bytes) and ``StreamDetails``.

StreamDetails is the header followed by exactly ``topics_count`` topic headers; the 0.8
SDK rejects a payload whose count differs, so ``write`` derives the count from the list.
GetStreams answers a concatenation of headers.
"""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.responses.topics import TopicHeader


class StreamHeader(WireStruct, frozen=True):
    id: int
    created_at: int
    topics_count: int
    size_bytes: int
    messages_count: int
    name: str

    def write(self, w: Writer) -> None:
        w.u32(self.id).u64(self.created_at).u32(self.topics_count)
        w.u64(self.size_bytes).u64(self.messages_count).name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("stream id"), r.u64("created_at"), r.u32("topics_count"),
                   r.u64("size_bytes"), r.u64("messages_count"), r.name("stream name"))


class StreamDetails(WireStruct, frozen=True):
    header: StreamHeader
    topics: list[TopicHeader]

    def write(self, w: Writer) -> None:
        h = self.header
        StreamHeader(h.id, h.created_at, len(self.topics), h.size_bytes,
                     h.messages_count, h.name).write(w)
        for topic in self.topics:
            topic.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        header = StreamHeader.read(r)
        topics = [TopicHeader.read(r) for _ in range(header.topics_count)]
        return cls(header, topics)
