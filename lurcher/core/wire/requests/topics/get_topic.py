"""GetTopic (300): stream Id, topic Id; answered with ``TopicDetails`` or empty."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamTopicRequest


class GetTopic(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 300
