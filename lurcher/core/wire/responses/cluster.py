"""GetClusterMetadata's answer: ``ClusterMetadata`` = name str(u32), nodes_count u32, then
``ClusterNode``s (name str(u32), ip str(u32), tcp/quic/http/websocket ports u16, role u8,
status u8). The writer derives nodes_count from the list."""

from __future__ import annotations

import enum
import struct
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct

NODE_TAIL = struct.Struct("<HHHHBB")
assert NODE_TAIL.size == 10


class NodeRole(enum.IntEnum):
    LEADER = 0
    FOLLOWER = 1


class NodeStatus(enum.IntEnum):
    HEALTHY = 0
    STARTING = 1
    STOPPING = 2
    UNREACHABLE = 3
    MAINTENANCE = 4
    UNKNOWN = 5


class ClusterNode(WireStruct, frozen=True):
    name: str
    ip: str
    tcp_port: int
    quic_port: int
    http_port: int
    websocket_port: int
    role: int = NodeRole.LEADER
    status: int = NodeStatus.HEALTHY

    def write(self, w: Writer) -> None:
        w.str32(self.name).str32(self.ip)
        w.raw(NODE_TAIL.pack(self.tcp_port, self.quic_port, self.http_port,
                             self.websocket_port, self.role, self.status))

    @classmethod
    def read(cls, r: Reader) -> Self:
        name, ip = r.str32("node name"), r.str32("node ip")
        return cls(name, ip, *NODE_TAIL.unpack_from(r.buf, r.need(NODE_TAIL.size, "node")))


class ClusterMetadata(WireStruct, frozen=True):
    name: str
    nodes: list[ClusterNode]

    def write(self, w: Writer) -> None:
        w.str32(self.name).u32(len(self.nodes))
        for node in self.nodes:
            node.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        name = r.str32("cluster name")
        count = r.u32("nodes_count")
        return cls(name, [ClusterNode.read(r) for _ in range(count)])
