"""LoginUser / LoginWithPersonalAccessToken answer: ``IdentityInfo`` (user_id u32)."""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct


class IdentityInfo(WireStruct, frozen=True):
    user_id: int

    def write(self, w: Writer) -> None:
        w.u32(self.user_id)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("user id"))
