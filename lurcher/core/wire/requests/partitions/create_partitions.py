"""CreatePartitions (402): stream Id, topic Id, ``partitions_count u32`` (appended after the
existing ones). ``validate``: 1..1000 (TOO_MANY_PARTITIONS, the 0.8 handler rule). Empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.common import PartitionsCountRequest
from lurcher.core.wire.requests.topics.create_topic import MAX_PARTITIONS_PER_REQUEST


class CreatePartitions(PartitionsCountRequest, frozen=True):
    CODE: ClassVar[int] = 402

    def validate(self) -> None:
        """Raises IggyError TOO_MANY_PARTITIONS for a count of 0 or above 1000."""
        if not 1 <= self.partitions_count <= MAX_PARTITIONS_PER_REQUEST:
            raise IggyError(ErrorCode.TOO_MANY_PARTITIONS, f"{self.partitions_count} partitions")
