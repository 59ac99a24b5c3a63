"""DeletePersonalAccessToken (43): the token's name as name(u8). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request


class DeletePersonalAccessToken(Request, frozen=True):
    CODE: ClassVar[int] = 43
    name: str

    def write(self, w: Writer) -> None:
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("token name"))
