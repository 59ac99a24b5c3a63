"""StoreConsumerOffset (121): Consumer, stream Id, topic Id, optional partition id (5 bytes),
``offset u64``. Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import OffsetRequest
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partition_id import read_optional_partition_id


class StoreConsumerOffset(OffsetRequest, frozen=True):
    CODE: ClassVar[int] = 121
    offset: int

    def write(self, w: Writer) -> None:
        OffsetRequest.write(self, w)
        w.u64(self.offset)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Consumer.read(r), Identifier.read(r, "stream id"),
                   Identifier.read(r, "topic id"), read_optional_partition_id(r),
                   r.u64("offset"))
