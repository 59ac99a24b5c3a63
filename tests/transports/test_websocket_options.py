"""The WebSocket connection-string options of Iggy's that the SDK applies, against a real
server: ``max_frame_size`` (the largest frame of a response message) and
``max_write_buffer_size`` (the write buffer's high-water mark). Both used to be checked at
parse and then ignored."""

from __future__ import annotations

import pytest

from lurcher.sdk import Client, ErrorCode, IggyError
from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON

FRAME_LIMIT = 4096


@pytest.fixture
def ws_server(server_factory) -> LurcherServer:
    return server_factory(ALL_ON)


def ws_client(server: LurcherServer, options: str) -> Client:
    address = server.endpoints["websocket"]
    return Client.from_connection_string(f"iggy+ws://iggy:iggy@{address}?{options}",
                                         heartbeat_interval_s=None)


async def test_a_response_frame_above_max_frame_size_is_refused(ws_server) -> None:
    client = ws_client(ws_server, f"max_frame_size={FRAME_LIMIT}")
    await client.connect()
    try:
        await client.create_stream("s")
        await client.create_topic("s", "t", 1)
        await client.send_messages("s", "t", [bytes(FRAME_LIMIT * 2)], 0)  # requests: any size
        small = await client.poll_messages("s", "t", 0, "first", 0)  # an empty answer fits
        assert list(small.messages()) == []
        with pytest.raises(IggyError) as refused:
            await client.poll_messages("s", "t", 0, "first", 1)
        assert refused.value.code == ErrorCode.INVALID_BYTES_RESPONSE
    finally:
        await client.close()
    roomy = ws_client(ws_server, f"max_frame_size={FRAME_LIMIT * 4}")
    await roomy.connect()
    try:
        polled = await roomy.poll_messages("s", "t", 0, "first", 1)
        assert [len(m.payload) for m in polled.messages()] == [FRAME_LIMIT * 2]
    finally:
        await roomy.close()


async def test_max_write_buffer_size_is_the_write_buffer_s_high_water_mark(ws_server) -> None:
    client = ws_client(ws_server, "max_write_buffer_size=200000")
    await client.connect()
    try:
        await client.ping()
        transport = client._conn._ws.transport  # noqa: SLF001 - what the option sets
        assert transport.get_write_buffer_limits()[1] == 200_000
    finally:
        await client.close()
