"""A UDP relay for QUIC tests: one client, one server, a path the test controls.

``UdpRelay`` listens on 127.0.0.1 (port 0) and forwards every datagram of the first client
to the server and every answer back. It can drop datagrams above ``max_datagram`` bytes (a
path with a small MTU), hold the client-to-server direction (``hold_upstream``: the server
hears nothing, so gets no acknowledgement) and counts, per direction, the datagrams and bytes
forwarded, the largest forwarded and the dropped ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Direction:
    datagrams: int = 0
    bytes: int = 0
    largest: int = 0
    dropped: int = 0
    sizes: list[int] = field(default_factory=list)

    def count(self, size: int) -> None:
        self.datagrams += 1
        self.bytes += size
        self.largest = max(self.largest, size)
        self.sizes.append(size)


class _Side(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Any) -> None:
        self.on_datagram = on_datagram

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.on_datagram(data, addr)


class UdpRelay:
    """Forwards between one client and ``server``; ``address`` is where clients connect."""

    def __init__(self, server: tuple[str, int], max_datagram: int | None = None) -> None:
        self.server = server
        self.max_datagram = max_datagram
        self.hold_upstream = False
        self.up, self.down = Direction(), Direction()
        self.client: Any = None
        self.front: Any = None
        self.back: Any = None

    async def start(self) -> "UdpRelay":
        loop = asyncio.get_running_loop()
        self.front, _ = await loop.create_datagram_endpoint(
            lambda: _Side(self.from_client), local_addr=("127.0.0.1", 0))
        self.back, _ = await loop.create_datagram_endpoint(
            lambda: _Side(self.from_server), remote_addr=self.server)
        return self

    @property
    def address(self) -> str:
        host, port = self.front.get_extra_info("sockname")[:2]
        return f"{host}:{port}"

    def passes(self, data: bytes, direction: Direction) -> bool:
        if self.max_datagram is not None and len(data) > self.max_datagram:
            direction.dropped += 1
            return False
        direction.count(len(data))
        return True

    def from_client(self, data: bytes, addr: Any) -> None:
        self.client = addr
        if self.hold_upstream:
            self.up.dropped += 1
        elif self.passes(data, self.up):
            self.back.sendto(data)

    def from_server(self, data: bytes, addr: Any) -> None:
        if self.client is not None and self.passes(data, self.down):
            self.front.sendto(data, self.client)

    def close(self) -> None:
        for transport in (self.front, self.back):
            if transport is not None:
                transport.close()
