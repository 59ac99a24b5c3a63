"""A send whose reply was lost is sent again by the client (it reconnects and retries). The SDK
gives every message it builds without an id a random id, so the second copy carries the same
ids: a server that deduplicates ids stores the batch once; one that does not stores it twice
(delivery is at least once). The reply is lost by a real TCP relay between the SDK and a real
server, after the server has stored the batch."""

from __future__ import annotations

import pytest

from lurcher.sdk import Client, Producer
from tests.sdk.conftest import messages_of
from tests.support.tcp_relay import TcpRelay

DEDUPLICATION = {"LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true",
                 "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY": "10 m"}
PAYLOADS = [f"order-{i}".encode() for i in range(250)]


async def _send_through(relay: TcpRelay, how: str) -> list[bytes]:
    """Send ``PAYLOADS`` to partition 0 while the relay loses the first reply; what the
    partition then holds."""
    client = Client.from_connection_string(
        f"iggy://iggy:iggy@127.0.0.1:{relay.port}"
        "?reconnection_interval=100ms&heartbeat_interval=1h")
    async with client:
        await client.create_stream("shop")
        await client.create_topic("shop", "orders", 1)
        relay.lose_next_reply()
        if how == "client":
            await client.send_messages("shop", "orders", PAYLOADS, partitioning=0)
        else:
            async with Producer(client, "shop", "orders", partitioning=0,
                                batch_length=100) as producer:
                await producer.send(PAYLOADS)
        assert not relay.reply_to_lose, "the relay lost no reply"
        polled = await client.poll_messages("shop", "orders", 0, "first", 1000)
        return [m.payload for m in messages_of(polled)]


@pytest.mark.parametrize("how", ["client", "producer"])
async def test_a_retried_send_is_stored_once_when_the_server_deduplicates(
        server_factory, how: str) -> None:
    server = server_factory(DEDUPLICATION)
    relay = await TcpRelay((server.host, server.tcp_port)).start()
    try:
        assert await _send_through(relay, how) == PAYLOADS
    finally:
        await relay.close()


@pytest.mark.parametrize("how", ["client", "producer"])
async def test_without_deduplication_the_retried_batch_is_stored_twice(
        server_factory, how: str) -> None:
    server = server_factory()
    relay = await TcpRelay((server.host, server.tcp_port)).start()
    try:
        first_batch = PAYLOADS if how == "client" else PAYLOADS[:100]
        assert await _send_through(relay, how) == first_batch + PAYLOADS
    finally:
        await relay.close()
