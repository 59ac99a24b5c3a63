"""Personal-access-token responses: ``RawToken`` (CreatePersonalAccessToken: the raw token
as name(u8)) and ``PatInfo`` (GetPersonalAccessTokens items: name(u8), expiry_at u64 µs
timestamp, 0 = never)."""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct


class RawToken(WireStruct, frozen=True):
    token: str

    def write(self, w: Writer) -> None:
        w.name(self.token)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("token"))


class PatInfo(WireStruct, frozen=True):
    name: str
    expiry_at: int = 0

    def write(self, w: Writer) -> None:
        w.name(self.name).u64(self.expiry_at)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("token name"), r.u64("expiry_at"))
