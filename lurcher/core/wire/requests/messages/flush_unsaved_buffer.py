"""FlushUnsavedBuffer (102): stream Id, topic Id, ``partition_id u32`` (plain, no flag),
``fsync u8`` (any non-zero byte is true, as in the 0.8 server). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest


class FlushUnsavedBuffer(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 102
    partition_id: int
    fsync: bool = False

    def write(self, w: Writer) -> None:
        StreamTopicRequest.write(self, w)
        w.u32(self.partition_id).bool(self.fsync)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.u32("partition id"), r.u8("fsync") != 0)
