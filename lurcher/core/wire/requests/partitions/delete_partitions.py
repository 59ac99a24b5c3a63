"""DeletePartitions (403): stream Id, topic Id, ``partitions_count u32`` (removes the last N).
``validate``: count 0 is TOO_MANY_PARTITIONS (the 0.8 handler's code). Empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.common import PartitionsCountRequest


class DeletePartitions(PartitionsCountRequest, frozen=True):
    CODE: ClassVar[int] = 403

    def validate(self) -> None:
        """Raises IggyError TOO_MANY_PARTITIONS for a count of 0."""
        if self.partitions_count == 0:
            raise IggyError(ErrorCode.TOO_MANY_PARTITIONS, "0 partitions")
