"""GetConsumerOffset (120): Consumer, stream Id, topic Id, optional partition id (5 bytes).
Answered with ``ConsumerOffsetInfo`` or empty when nothing is stored."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partition_id import (
    read_optional_partition_id,
    write_optional_partition_id,
)


class OffsetRequest(Request, frozen=True):
    """Base of the three consumer-offset requests (shared leading fields)."""

    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None

    def write(self, w: Writer) -> None:
        self.consumer.write(w)
        self.stream_id.write(w)
        self.topic_id.write(w)
        write_optional_partition_id(w, self.partition_id)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Consumer.read(r), Identifier.read(r, "stream id"),
                   Identifier.read(r, "topic id"), read_optional_partition_id(r))


class GetConsumerOffset(OffsetRequest, frozen=True):
    CODE: ClassVar[int] = 120
