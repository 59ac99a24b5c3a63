"""QUIC over a path the test controls (issue 18): a real server, our SDK, a UDP relay between.

- A path that drops datagrams above 1,400 bytes: both ends start large (``initial_mtu``),
  lose them, fall back to 1,200 bytes and the requests complete (a 1,000 x 1 KB batch sent
  and polled back).
- ``initial_mtu`` (server key and SDK option) is the size of full datagrams after the
  handshake, each way.
- ``keep_alive_interval``: the server pings an idle client that never pings.
- ``receive_window`` and ``max_concurrent_bidi_streams`` are what the server announces.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from lurcher.sdk.client import Client
from tests.support.server import LurcherServer, ServerFactory
from tests.support.udp_relay import UdpRelay

QUIC_ON = {"LURCHER_QUIC_ENABLED": "true", "LURCHER_QUIC_ADDRESS": "127.0.0.1:0"}
PATH_MTU = 1_400
MESSAGES, PAYLOAD = 1_000, 1_000
DONE_WITHIN_S = 60.0


def quic_server(server_factory: ServerFactory, **keys: str) -> LurcherServer:
    env = {f"LURCHER_QUIC_{key.upper()}": value for key, value in keys.items()}
    return server_factory({**QUIC_ON, **env})


@asynccontextmanager
async def relayed_client(server: LurcherServer, max_datagram: int | None = None,
                         **options: str) -> AsyncIterator[tuple[Client, UdpRelay]]:
    host, port = server.endpoints["quic"].rsplit(":", 1)
    relay = await UdpRelay((host, int(port)), max_datagram).start()
    client = Client(relay.address, transport="quic", heartbeat_interval_s=None,
                    reconnection_enabled=False, request_timeout_s=DONE_WITHIN_S,
                    username="iggy", password="iggy", options=options)
    try:
        await client.connect()
        yield client, relay
    finally:
        await client.close()
        relay.close()


async def send_and_poll(client: Client) -> None:
    payloads = [bytes([i % 251]) * PAYLOAD for i in range(MESSAGES)]
    await client.create_stream("path")
    await client.create_topic("path", "t", 1)
    await client.send_messages("path", "t", payloads, 0)
    polled = await client.poll_messages("path", "t", 0, strategy=0, count=MESSAGES)
    assert [bytes(m.payload) for m in polled.messages()] == payloads


def quic_of(client: Client) -> Any:
    """The aioquic connection under the SDK client (read-only, for transport parameters)."""
    return client._conn._proto._quic


async def test_a_path_dropping_large_datagrams_still_completes_requests(
        server_factory: ServerFactory) -> None:
    server = quic_server(server_factory)
    async with relayed_client(server, PATH_MTU) as (client, relay):
        await asyncio.wait_for(send_and_poll(client), DONE_WITHIN_S)
    assert relay.up.dropped > 0 and relay.down.dropped > 0  # both ends tried large first
    assert relay.up.largest <= PATH_MTU and relay.down.largest <= PATH_MTU


async def test_initial_mtu_is_the_datagram_size_each_way(server_factory: ServerFactory) -> None:
    server = quic_server(server_factory, initial_mtu="4000 B")
    async with relayed_client(server, initial_mtu="3000") as (client, relay):
        await send_and_poll(client)
    assert relay.up.largest == 3_000  # the SDK's option
    assert relay.down.largest == 4_000  # the server's key
    assert relay.up.dropped == relay.down.dropped == 0


async def test_the_server_pings_an_idle_client_every_keep_alive_interval(
        server_factory: ServerFactory) -> None:
    server = quic_server(server_factory, keep_alive_interval="100 ms")
    async with relayed_client(server, keep_alive_interval="none") as (client, relay):
        await client.ping()
        before = relay.down.datagrams
        await asyncio.sleep(1.0)
        pings = relay.down.datagrams - before
    assert 5 <= pings <= 15


async def test_a_client_of_a_server_without_keep_alive_hears_nothing_when_idle(
        server_factory: ServerFactory) -> None:
    server = quic_server(server_factory, keep_alive_interval="none")
    async with relayed_client(server, keep_alive_interval="none") as (client, relay):
        await client.ping()
        await asyncio.sleep(0.2)  # the last acknowledgements
        before = relay.down.datagrams + relay.up.datagrams
        await asyncio.sleep(1.0)
        assert relay.down.datagrams + relay.up.datagrams == before


async def test_the_server_announces_its_receive_window_and_stream_limit(
        server_factory: ServerFactory) -> None:
    server = quic_server(server_factory, receive_window="300 KiB",
                         max_concurrent_bidi_streams="3")
    async with relayed_client(server) as (client, _):
        quic = quic_of(client)
        assert quic._remote_max_data == 300 * 1024
        assert quic._remote_max_streams_bidi == 3
        await send_and_poll(client)  # a 1 MB request through a 300 KiB window still works
