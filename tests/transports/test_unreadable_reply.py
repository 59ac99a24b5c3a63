"""A poll whose stored bytes cannot be read (the partition's log cut short under the running
server) is answered on every transport, never left hanging until the client's timeout: the
stream transports end the connection (the reply's framing cannot be kept; WebSocket and QUIC
say why in their close), HTTP answers CANNOT_READ_FILE (its reason is in the JSON body,
which the SDK does not pass on). The server keeps serving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from tests.support.server import LurcherServer
from tests.transports.conftest import TRANSPORTS, CaFiles, make_client

PAYLOAD = 1000
STORED_HEADER = 64

# What each transport's client sees: the error code, and whether the reason reaches it.
EXPECTED = {"tcp": (ErrorCode.CONNECTION_CLOSED, False),
            "ws": (ErrorCode.CONNECTION_CLOSED, True),
            "quic": (ErrorCode.CONNECTION_CLOSED, True),
            "http": (ErrorCode.CANNOT_READ_FILE, False)}


def partition_log(server: LurcherServer, stream_id: int) -> Path:
    assert server.data_dir is not None
    [log] = [p for p in server.data_dir.rglob("*.log")
             if p.parts[-7:-5] == ("streams", str(stream_id))]
    return log


async def test_a_poll_whose_bytes_cannot_be_read_is_answered(
        transport_server: LurcherServer, transport_name: str, sdk_client: Client,
        test_ca: CaFiles) -> None:
    name = f"unreadable-{transport_name}"
    await sdk_client.create_stream(name)
    await sdk_client.create_topic(name, "t", 1)
    await sdk_client.send_messages(name, "t", [bytes([i]) * PAYLOAD for i in range(10)], 0)
    stream = await sdk_client.get_stream(name)
    assert stream is not None
    os.truncate(partition_log(transport_server, stream.header.id), STORED_HEADER + PAYLOAD)

    with pytest.raises(IggyError) as failed:
        await sdk_client.poll_messages(name, "t", 0, strategy=0, count=10)

    code, says_why = EXPECTED[TRANSPORTS[transport_name][2]]
    assert failed.value.code == code
    assert ("cannot read a reply" in str(failed.value)) == says_why
    fresh = make_client(transport_server, transport_name, test_ca,
                        username="iggy", password="iggy")
    await fresh.connect()
    try:
        assert name in [s.name for s in await fresh.get_streams()]
    finally:
        await fresh.close()
