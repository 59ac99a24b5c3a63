"""DeleteConsumerGroup (603): stream Id, topic Id, group Id; empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import GroupRequest


class DeleteConsumerGroup(GroupRequest, frozen=True):
    CODE: ClassVar[int] = 603
