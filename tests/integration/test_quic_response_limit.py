"""The SDK's ``response_buffer_size`` over QUIC, TCP, WebSocket and HTTP, against a real
server (TCP and WebSocket ignored it and took any length the server announced; HTTP read any
body): a poll whose reply frame (over HTTP: JSON body) is longer fails with
INVALID_BYTES_RESPONSE, and the client goes on serving (as on every transport, the SDK
drops a connection whose exchange failed and reconnects, logged in again, for the next
request)."""

from __future__ import annotations

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from tests.support.server import ServerFactory

QUIC_ON = {"LURCHER_QUIC_ENABLED": "true", "LURCHER_QUIC_ADDRESS": "127.0.0.1:0"}
WS_ON = {"LURCHER_WEBSOCKET_ENABLED": "true", "LURCHER_WEBSOCKET_ADDRESS": "127.0.0.1:0"}
HTTP_ON = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}
TRANSPORTS = {"quic": (QUIC_ON, "quic"), "tcp": ({}, "tcp"), "ws": (WS_ON, "websocket"),
              "http": (HTTP_ON, "http")}
MESSAGES, PAYLOAD = 200, 1_000
LIMIT = 50_000  # a fifth of the poll's reply


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_reply_over_the_response_buffer_size_fails_and_the_client_goes_on(
        server_factory: ServerFactory, transport: str) -> None:
    env, endpoint = TRANSPORTS[transport]
    server = server_factory(env)
    client = Client(server.endpoints[endpoint], transport=transport, username="iggy",
                    password="iggy", heartbeat_interval_s=None,
                    options={"response_buffer_size": str(LIMIT)})
    await client.connect()
    try:
        payloads = [bytes([i % 251]) * PAYLOAD for i in range(MESSAGES)]
        await client.create_stream("limit")
        await client.create_topic("limit", "t", 1)
        await client.send_messages("limit", "t", payloads, 0)
        with pytest.raises(IggyError) as caught:
            await client.poll_messages("limit", "t", 0, strategy=0, count=MESSAGES)
        assert caught.value.code == ErrorCode.INVALID_BYTES_RESPONSE
        few = await client.poll_messages("limit", "t", 0, strategy=0, count=20)
        assert [bytes(m.payload) for m in few.messages()] == payloads[:20]
        assert (await client.get_stream("limit")).header.name == "limit"
    finally:
        await client.close()


async def test_the_default_limit_takes_a_poll_reply_up_to_the_servers_cap(
        server_factory: ServerFactory) -> None:
    """The server answers a poll with up to limits.max_poll_reply_bytes (16 MiB) of
    messages; QUIC's default response_buffer_size was 10 MB, so a consumer polling 12 MB
    failed every poll with INVALID_BYTES_RESPONSE."""
    server = server_factory(QUIC_ON)
    client = Client(server.endpoints["quic"], transport="quic", username="iggy",
                    password="iggy", heartbeat_interval_s=None)
    await client.connect()
    try:
        payloads = [bytes([i]) * 1_000_000 for i in range(12)]
        await client.create_stream("big")
        await client.create_topic("big", "t", 1)
        for payload in payloads:
            await client.send_messages("big", "t", [payload], 0)
        polled = await client.poll_messages("big", "t", 0, strategy=0, count=len(payloads))
        assert [bytes(m.payload) for m in polled.messages()] == payloads
    finally:
        await client.close()
