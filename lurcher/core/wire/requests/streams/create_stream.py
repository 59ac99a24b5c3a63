"""CreateStream (202): the stream's name as name(u8). 0.8 has no client-chosen id.

Answered with a ``StreamDetails`` whose ``topics_count`` is 0.
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.validation import check_name


class CreateStream(Request, frozen=True):
    CODE: ClassVar[int] = 202
    name: str

    def write(self, w: Writer) -> None:
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("stream name"))

    def validate(self) -> None:
        """Raises IggyError INVALID_STREAM_NAME: the name must have 1..255 UTF-8 bytes."""
        check_name(self.name, ErrorCode.INVALID_STREAM_NAME)
