"""CreateTopic (302): stream Identifier, ``partitions_count u32``, ``compression u8``,
``message_expiry u64`` (µs; 0 server default, u64::MAX never), ``max_topic_size u64``
(bytes; 0 server default, u64::MAX unlimited), ``replication_factor u8`` (0 = not given),
name(u8). Answered with ``TopicDetails``.

Decode is structural, as the 0.8 server; ``validate`` applies its later checks:
partitions_count <= 1000 (TOO_MANY_PARTITIONS) and the settings rules of
``core.wire.validation.check_topic_settings`` (name, compression, u64/u8 ranges).
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamRequest
from lurcher.core.wire.validation import check_topic_settings, check_uint

MAX_PARTITIONS_PER_REQUEST = 1000


def write_settings(w: Writer, t: Any) -> None:
    """The settings both CreateTopic and UpdateTopic end with."""
    w.u8(t.compression).u64(t.message_expiry_us).u64(t.max_topic_size_bytes)
    w.u8(t.replication_factor).name(t.name)


def read_settings(r: Reader) -> tuple[int, int, int, int, str]:
    """(compression, message_expiry_us, max_topic_size_bytes, replication_factor, name)."""
    return (r.u8("compression"), r.u64("message_expiry"), r.u64("max_topic_size"),
            r.u8("replication_factor"), r.name("topic name"))


class CreateTopic(StreamRequest, frozen=True):
    CODE: ClassVar[int] = 302
    partitions_count: int
    compression: int
    message_expiry_us: int
    max_topic_size_bytes: int
    replication_factor: int
    name: str

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)
        w.u32(self.partitions_count)
        write_settings(w, self)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), r.u32("partitions_count"), *read_settings(r))

    def validate(self) -> None:
        """Raises IggyError TOO_MANY_PARTITIONS or a settings error (see the module doc)."""
        check_uint(self.partitions_count, 32, "partitions_count", ErrorCode.TOO_MANY_PARTITIONS)
        if self.partitions_count > MAX_PARTITIONS_PER_REQUEST:
            raise IggyError(ErrorCode.TOO_MANY_PARTITIONS, f"{self.partitions_count} partitions")
        check_topic_settings(self)
