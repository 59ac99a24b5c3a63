"""The server endpoint's routing of datagrams read together (``RoutingQuicServer``): runs of
short-header datagrams go to their connection in one call, found by connection ID, and
every other datagram goes through aioquic's ``datagram_received``, all in arrival order."""

from __future__ import annotations

import asyncio

from aioquic.quic.configuration import QuicConfiguration

from lurcher.transports.quic import RoutingQuicServer

CID_A, CID_B, CID_UNKNOWN = b"A" * 8, b"B" * 8, b"X" * 8
ADDR = ("127.0.0.1", 5)


class Connection:
    """Records what the endpoint hands to one connection."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def datagrams_received(self, datagrams: list[bytes], addr) -> None:
        self.log.append((self.name, datagrams, addr))


def short(cid: bytes, tag: bytes) -> bytes:
    return bytes([0x40]) + cid + tag


def test_runs_go_to_their_connection_and_the_rest_to_aioquic_in_order() -> None:
    asyncio.run(_route())


async def _route() -> None:
    log: list = []
    server = RoutingQuicServer(configuration=QuicConfiguration(is_client=False),
                               create_protocol=None)
    server._protocols = {CID_A: Connection("A", log), CID_B: Connection("B", log)}
    server.datagram_received = lambda data, addr: log.append(("aioquic", [data], addr))
    a1, a2, a3 = short(CID_A, b"1"), short(CID_A, b"2"), short(CID_A, b"3")
    b1 = short(CID_B, b"1")
    long_header = bytes([0xC0]) + b"\x00\x00\x00\x01" + b"initial"
    unknown = short(CID_UNKNOWN, b"?")
    no_fixed_bit = bytes([0x00]) + CID_A + b"z"
    server.datagrams_received([a1, a2, long_header, b1, unknown, a3, no_fixed_bit, b"",
                               b1, a1, a2], ADDR)
    assert log == [("A", [a1, a2], ADDR), ("aioquic", [long_header], ADDR),
                   ("B", [b1], ADDR), ("aioquic", [unknown], ADDR), ("A", [a3], ADDR),
                   ("aioquic", [no_fixed_bit], ADDR), ("aioquic", [b""], ADDR),
                   ("B", [b1], ADDR), ("A", [a1, a2], ADDR)]
