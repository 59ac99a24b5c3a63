"""PollMessages (100): Consumer, stream Id, topic Id, optional partition id (5 bytes),
PollingStrategy (9 bytes), ``count u32``, ``auto_commit u8``.

As in the 0.8 server, any non-zero auto_commit byte is true. Answered with
``PolledMessages`` (always at least its 16-byte prefix).
"""

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
from lurcher.core.wire.values.polling import PollingStrategy


class PollMessages(Request, frozen=True):
    CODE: ClassVar[int] = 100
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None
    strategy: PollingStrategy
    count: int
    auto_commit: bool = False

    def write(self, w: Writer) -> None:
        self.consumer.write(w)
        self.stream_id.write(w)
        self.topic_id.write(w)
        write_optional_partition_id(w, self.partition_id)
        self.strategy.write(w)
        w.u32(self.count).bool(self.auto_commit)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Consumer.read(r), Identifier.read(r, "stream id"),
                   Identifier.read(r, "topic id"), read_optional_partition_id(r),
                   PollingStrategy.read(r), r.u32("count"), r.u8("auto_commit") != 0)
