"""DeleteTopic (303): stream Id, topic Id; empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamTopicRequest


class DeleteTopic(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 303
