"""User responses: ``UserHeader`` (id u32, created_at u64, status u8, username name(u8))
and ``UserDetails`` = header + permissions part.

Permissions part: four zero bytes when absent; otherwise ``01``, ``perm_len u32`` and the
blob. The reader follows the 0.8 SDK: first byte 0 -> skip 3 more bytes; any other value ->
u32 length + blob, decoded within exactly those bytes. GetUsers answers concatenated headers.
"""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.values.permissions import Permissions


class UserHeader(WireStruct, frozen=True):
    id: int
    created_at: int
    status: int
    username: str

    def write(self, w: Writer) -> None:
        w.u32(self.id).u64(self.created_at).u8(self.status).name(self.username)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("user id"), r.u64("created_at"), r.u8("status"), r.name("username"))


class UserDetails(WireStruct, frozen=True):
    header: UserHeader
    permissions: Permissions | None = None

    def write(self, w: Writer) -> None:
        self.header.write(w)
        if self.permissions is None:
            w.u32(0)
            return
        blob = self.permissions.encode()
        w.u8(1).u32(len(blob)).raw(blob)

    @classmethod
    def read(cls, r: Reader) -> Self:
        header = UserHeader.read(r)
        if r.u8("has permissions") == 0:
            r.need(3, "permissions padding")
            return cls(header)
        blob = r.view(r.u32("permissions length"), "permissions")
        return cls(header, Permissions.read(Reader(blob)))
