"""DeleteConsumerOffset (122): Consumer, stream Id, topic Id, optional partition id (5 bytes).
Empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import OffsetRequest


class DeleteConsumerOffset(OffsetRequest, frozen=True):
    CODE: ClassVar[int] = 122
