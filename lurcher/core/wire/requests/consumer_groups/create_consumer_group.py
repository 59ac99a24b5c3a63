"""CreateConsumerGroup (602): stream Id, topic Id, name(u8). Answered with a group header
with members_count 0 (decoded by clients as ``GroupDetails``)."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest
from lurcher.core.wire.validation import check_name


class CreateConsumerGroup(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 602
    name: str

    def write(self, w: Writer) -> None:
        super().write(w)
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.name("group name"))

    def validate(self) -> None:
        """Raises IggyError INVALID_CONSUMER_GROUP_NAME: the name must have 1..255 UTF-8 bytes."""
        check_name(self.name, ErrorCode.INVALID_CONSUMER_GROUP_NAME)
