"""LoginWithPersonalAccessToken (44): the raw token as name(u8). Answered with
``IdentityInfo``."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request


class LoginWithPersonalAccessToken(Request, frozen=True):
    CODE: ClassVar[int] = 44
    token: str

    def write(self, w: Writer) -> None:
        w.name(self.token)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("token"))
