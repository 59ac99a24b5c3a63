"""GetTopics (301): stream Identifier; answered with concatenated ``TopicHeader``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamRequest


class GetTopics(StreamRequest, frozen=True):
    CODE: ClassVar[int] = 301
