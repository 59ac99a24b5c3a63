"""GetConsumerOffset's answer: ``ConsumerOffsetInfo`` (20 bytes: partition_id u32,
current_offset u64, stored_offset u64). Nothing stored is an empty OK, not this value."""

from __future__ import annotations

import struct
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct

OFFSET_INFO = struct.Struct("<IQQ")
assert OFFSET_INFO.size == 20


class ConsumerOffsetInfo(WireStruct, frozen=True):
    partition_id: int
    current_offset: int
    stored_offset: int

    def write(self, w: Writer) -> None:
        w.raw(OFFSET_INFO.pack(self.partition_id, self.current_offset, self.stored_offset))

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(*OFFSET_INFO.unpack_from(r.buf, r.need(OFFSET_INFO.size, "offset info")))
