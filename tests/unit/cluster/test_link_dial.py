"""A node's dial to a member: its handshake deadline counts from the TCP connection, not
from before the member's host name was looked up (real sockets, two ``Links`` in process).

With the deadline counted from the start of the dial, a lookup slower than
``handshake_timeout_s`` made every dial time out the moment it connected (before the
member's first bytes could come), so the link never came up: each new dial looked the name
up again."""

from __future__ import annotations

import asyncio
import time

import pytest

from lurcher.cluster.links import Links
from tests.support.server import free_ports

TIMEOUT_S, LOOKUP_S, DELAY_S = 1.0, 1.5, 0.05


async def delaying_relay(target_port: int) -> asyncio.base_events.Server:
    """Pipes each connection to ``target_port`` and back, every read ``DELAY_S`` late (a
    network that is not loopback-fast)."""
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await asyncio.sleep(DELAY_S)
                writer.write(data)
        except OSError:
            pass
        finally:
            writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target_reader, target_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(reader, target_writer), pipe(target_reader, writer))

    return await asyncio.start_server(relay, "127.0.0.1", 0)


async def test_a_slow_name_lookup_does_not_use_up_the_dials_handshake_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    looked_up = loop.getaddrinfo

    async def slow_lookup(*args, **kwargs):
        await asyncio.sleep(LOOKUP_S)
        return await looked_up(*args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", slow_lookup)
    port_0, port_1 = free_ports(2)
    relay = await delaying_relay(port_1)
    relay_port = relay.sockets[0].getsockname()[1]
    dialer = Links("c", b"s", 0, {1: ("localhost", relay_port)}, lambda *m: None, 1 << 20,
                   handshake_timeout_s=TIMEOUT_S)
    member = Links("c", b"s", 1, {0: ("127.0.0.1", port_0)}, lambda *m: None, 1 << 20,
                   handshake_timeout_s=TIMEOUT_S)
    await member.start("127.0.0.1", port_1)
    await dialer.start("127.0.0.1", port_0)
    try:
        deadline = time.monotonic() + 3 * LOOKUP_S + 2
        while 1 not in dialer.outgoing and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert 1 in dialer.outgoing, "the link to the member named 'localhost' never came up"
    finally:
        await dialer.close()
        await member.close()
        relay.close()
