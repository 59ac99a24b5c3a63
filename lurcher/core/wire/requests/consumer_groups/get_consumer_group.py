"""GetConsumerGroup (600): stream Id, topic Id, group Id; answered with ``GroupDetails`` or
empty."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import GroupRequest


class GetConsumerGroup(GroupRequest, frozen=True):
    CODE: ClassVar[int] = 600
