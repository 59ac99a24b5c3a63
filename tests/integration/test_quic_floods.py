"""A flood of forged Initial packets against a real server's QUIC endpoint (no handshake, no
credentials, a fresh connection ID each): the server's memory stays bounded, and a real
client connecting during the flood (sent a Retry first) logs in and is served.

Before ``lurcher.transports.quic_admission`` each forged Initial made an aioquic connection
(about 90 KiB, held until the idle timeout) and every one that ended scanned every other's
IDs: 3,000 of them cost the server about 130 MB, and 10,000 kept it busy for tens of
seconds after the flood.
"""

from __future__ import annotations

import socket

from lurcher.sdk.client import Client
from lurcher.transports.quic_admission import MAX_HANDSHAKES
from tests.support.quic_pair import forged_initial
from tests.support.server import LurcherServer, ServerFactory

QUIC_ON = {"LURCHER_QUIC_ENABLED": "true", "LURCHER_QUIC_ADDRESS": "127.0.0.1:0"}
FORGED = 3_000
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def flood(server: LurcherServer, count: int) -> None:
    host, port = server.endpoints["quic"].rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(count):
            sock.sendto(forged_initial(), (host, int(port)))


async def ping_over_quic(server: LurcherServer) -> None:
    client = Client(server.endpoints["quic"], transport="quic", heartbeat_interval_s=None,
                    reconnection_enabled=False, request_timeout_s=30.0,
                    username="iggy", password="iggy")
    try:
        await client.connect()
        await client.ping()
        assert (await client.get_me()).header.user_id == 0
    finally:
        await client.close()


async def test_forged_initials_leave_memory_bounded_and_clients_served(
        server_factory: ServerFactory) -> None:
    server = server_factory(QUIC_ON)
    await ping_over_quic(server)
    before = rss_bytes(server.pid)
    flood(server, FORGED)
    await ping_over_quic(server)  # the forged handshakes are still under way: via a Retry
    flood(server, FORGED)
    await ping_over_quic(server)
    grown = rss_bytes(server.pid) - before
    assert grown < 40 * MIB, f"RSS grew {grown / MIB:.0f} MiB for {2 * FORGED} forged Initials"
    assert "Traceback" not in server.log_tail()
    assert MAX_HANDSHAKES < FORGED  # the cap, not the flood's size, bounds what is held
