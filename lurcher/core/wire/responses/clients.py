"""Client responses: ``ClientHeader`` (client_id u32, user_id u32 with 0xFFFFFFFF = not
logged in, transport u8, address str(u32), consumer_groups_count u32) and ``ClientDetails``
= header + exactly ``consumer_groups_count`` ``ClientGroup`` entries (12 bytes each).
GetClients answers concatenated headers; ``ClientDetails.write`` derives the count.
"""

from __future__ import annotations

import enum
import struct
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct

NO_USER = 0xFFFF_FFFF
CLIENT_GROUP = struct.Struct("<III")
assert CLIENT_GROUP.size == 12


class Transport(enum.IntEnum):
    TCP = 1
    QUIC = 2
    HTTP = 3
    WEBSOCKET = 4


class ClientHeader(WireStruct, frozen=True):
    client_id: int
    user_id: int
    transport: int
    address: str
    consumer_groups_count: int

    def write(self, w: Writer) -> None:
        w.u32(self.client_id).u32(self.user_id).u8(self.transport).str32(self.address)
        w.u32(self.consumer_groups_count)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("client id"), r.u32("user id"), r.u8("transport"),
                   r.str32("address"), r.u32("consumer_groups_count"))


class ClientGroup(WireStruct, frozen=True):
    stream_id: int
    topic_id: int
    group_id: int

    def write(self, w: Writer) -> None:
        w.raw(CLIENT_GROUP.pack(self.stream_id, self.topic_id, self.group_id))

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(*CLIENT_GROUP.unpack_from(r.buf, r.need(CLIENT_GROUP.size, "client group")))


class ClientDetails(WireStruct, frozen=True):
    header: ClientHeader
    consumer_groups: list[ClientGroup] = []

    def write(self, w: Writer) -> None:
        h = self.header
        ClientHeader(h.client_id, h.user_id, h.transport, h.address,
                     len(self.consumer_groups)).write(w)
        for group in self.consumer_groups:
            group.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        header = ClientHeader.read(r)
        groups = [ClientGroup.read(r) for _ in range(header.consumer_groups_count)]
        return cls(header, groups)
