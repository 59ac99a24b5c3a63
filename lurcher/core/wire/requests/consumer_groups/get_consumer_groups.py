"""GetConsumerGroups (601): stream Id, topic Id; answered with concatenated ``GroupHeader``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamTopicRequest


class GetConsumerGroups(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 601
