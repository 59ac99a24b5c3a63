"""UpdateTopic (304): stream Id, topic Id, ``compression u8``, ``message_expiry u64``,
``max_topic_size u64``, ``replication_factor u8``, name(u8) (no partitions count).
``validate``: compression 1..2 (INVALID_COMMAND). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest
from lurcher.core.wire.requests.topics.create_topic import check_compression


class UpdateTopic(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 304
    compression: int
    message_expiry_us: int
    max_topic_size_bytes: int
    replication_factor: int
    name: str

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)
        self.topic_id.write(w)
        w.u8(self.compression).u64(self.message_expiry_us).u64(self.max_topic_size_bytes)
        w.u8(self.replication_factor).name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.u8("compression"), r.u64("message_expiry"), r.u64("max_topic_size"),
                   r.u8("replication_factor"), r.name("topic name"))

    def validate(self) -> None:
        """Raises IggyError INVALID_COMMAND for an unknown compression code."""
        check_compression(self.compression)
