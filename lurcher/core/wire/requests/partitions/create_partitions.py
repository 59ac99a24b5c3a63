"""CreatePartitions (402): stream Id, topic Id, ``partitions_count u32`` (appended after the
existing ones). ``validate``: 1..1000 (TOO_MANY_PARTITIONS, the 0.8 handler rule). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest
from lurcher.core.wire.requests.topics.create_topic import MAX_PARTITIONS_PER_REQUEST


class CreatePartitions(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 402
    partitions_count: int

    def write(self, w: Writer) -> None:
        super().write(w)
        w.u32(self.partitions_count)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.u32("partitions_count"))

    def validate(self) -> None:
        """Raises IggyError TOO_MANY_PARTITIONS for a count of 0 or above 1000."""
        if not 1 <= self.partitions_count <= MAX_PARTITIONS_PER_REQUEST:
            raise IggyError(ErrorCode.TOO_MANY_PARTITIONS, f"{self.partitions_count} partitions")
