"""A poll whose stored bytes cannot be read (the partition's log cut short under the running
server) is answered at once on every transport, never left hanging until the client's
timeout: with CANNOT_READ_FILE on the same connection, which goes on serving; only a TCP reply
sent from the file (``sendfile``, 64 KiB or more) that fails half sent ends its connection,
since its framing cannot be kept. The server keeps serving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from tests.support.server import LurcherServer
from tests.transports.conftest import TRANSPORTS, CaFiles, make_client

STORED_HEADER = 64


def partition_log(server: LurcherServer, stream_id: int) -> Path:
    assert server.data_dir is not None
    [log] = [p for p in server.data_dir.rglob("*.log")
             if p.parts[-7:-5] == ("streams", str(stream_id))]
    return log


async def cut_log_after_first_message(client: Client, server: LurcherServer, name: str,
                                      payload_bytes: int) -> None:
    """Stream ``name`` with ten messages of ``payload_bytes``, its log then cut after the
    first one."""
    await client.create_stream(name)
    await client.create_topic(name, "t", 1)
    await client.send_messages(name, "t", [bytes([i]) * payload_bytes for i in range(10)], 0)
    stream = await client.get_stream(name)
    assert stream is not None
    os.truncate(partition_log(server, stream.header.id), STORED_HEADER + payload_bytes)


async def test_a_small_poll_that_cannot_be_read_is_answered_and_the_connection_goes_on(
        transport_server: LurcherServer, transport_name: str, sdk_client: Client) -> None:
    name = f"unreadable-small-{transport_name}"
    await cut_log_after_first_message(sdk_client, transport_server, name, 1000)

    with pytest.raises(IggyError) as failed:
        await sdk_client.poll_messages(name, "t", 0, strategy=0, count=10)

    assert failed.value.code == ErrorCode.CANNOT_READ_FILE
    polled = await sdk_client.poll_messages(name, "t", 0, strategy=0, count=1)
    assert [m.payload for m in polled.messages()] == [bytes([0]) * 1000]


async def test_a_large_poll_that_cannot_be_read_is_answered(
        transport_server: LurcherServer, transport_name: str, sdk_client: Client,
        test_ca: CaFiles) -> None:
    """1 MB asked for: TCP sends it from the file and finds the cut while sending, so it
    drops the connection; the other transports read it before sending."""
    name = f"unreadable-large-{transport_name}"
    await cut_log_after_first_message(sdk_client, transport_server, name, 100_000)

    with pytest.raises(IggyError) as failed:
        await sdk_client.poll_messages(name, "t", 0, strategy=0, count=10)

    if TRANSPORTS[transport_name][2] == "tcp":
        assert failed.value.code == ErrorCode.CONNECTION_CLOSED
        client = make_client(transport_server, transport_name, test_ca,
                             username="iggy", password="iggy")
        await client.connect()
    else:
        assert failed.value.code == ErrorCode.CANNOT_READ_FILE
        client = sdk_client
    try:
        assert name in [s.name for s in await client.get_streams()]
    finally:
        if client is not sdk_client:
            await client.close()
