"""CreateStream (202): the stream's name as name(u8). 0.8 has no client-chosen id.

Answered with a ``StreamDetails`` whose ``topics_count`` is 0.
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request


class CreateStream(Request, frozen=True):
    CODE: ClassVar[int] = 202
    name: str

    def write(self, w: Writer) -> None:
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("stream name"))
