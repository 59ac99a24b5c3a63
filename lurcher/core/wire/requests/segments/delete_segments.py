"""DeleteSegments (503): stream Id, topic Id, ``partition_id u32``, ``segments_count u32``
(the oldest N closed segments). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest


class DeleteSegments(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 503
    partition_id: int
    segments_count: int

    def write(self, w: Writer) -> None:
        super().write(w)
        w.u32(self.partition_id).u32(self.segments_count)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.u32("partition id"), r.u32("segments_count"))
