"""UpdateTopic (304): stream Id, topic Id, ``compression u8``, ``message_expiry u64``,
``max_topic_size u64``, ``replication_factor u8``, name(u8) (no partitions count).
``validate``: ``core.wire.validation.check_topic_settings``. Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamTopicRequest
from lurcher.core.wire.requests.topics.create_topic import read_settings, write_settings
from lurcher.core.wire.validation import check_topic_settings


class UpdateTopic(StreamTopicRequest, frozen=True):
    CODE: ClassVar[int] = 304
    compression: int
    message_expiry_us: int
    max_topic_size_bytes: int
    replication_factor: int
    name: str

    def write(self, w: Writer) -> None:
        super().write(w)
        write_settings(w, self)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   *read_settings(r))

    def validate(self) -> None:
        """Raises IggyError (name, compression, ranges; see check_topic_settings)."""
        check_topic_settings(self)
