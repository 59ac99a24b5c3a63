"""The client against a peer that misbehaves in ways a real server cannot: it accepts and
then never answers, or answers with a frame it never finishes. A tiny fake peer (an asyncio
server on 127.0.0.1) plays the server; ``answers(connection, request)`` decides what each
request gets (bytes to write, or None: silence)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from lurcher.sdk import Client, ErrorCode, IggyError, SyncClient
from tests.support.fake_peer import FakePeer, peers

OK = struct.pack("<II", 0, 0)

Answers = Callable[[int, int], bytes | None]  # (connection number, request number) -> reply


class AnsweringPeer(FakePeer):
    """Reads binary request frames; ``answers(connection, request)`` decides each reply."""

    def __init__(self, answers: Answers) -> None:
        super().__init__()
        self.answers = answers

    async def serve(self, connection: int, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        for number in range(1 << 30):
            length, _code = struct.unpack("<II", await reader.readexactly(8))
            await reader.readexactly(length - 4)
            reply = self.answers(connection, number)
            if reply is not None:
                writer.write(reply)


@pytest_asyncio.fixture
async def peer_factory() -> AsyncIterator[Callable[[Answers], "asyncio.Future[AnsweringPeer]"]]:
    async for start in peers(AnsweringPeer):
        yield start


def client_of(peer: AnsweringPeer, **options: str) -> Client:
    query = "&".join(f"{k}={v}" for k, v in {"reconnection_interval": "10ms",
                                            "heartbeat_interval": "1h", **options}.items())
    return Client.from_connection_string(f"iggy://iggy:iggy@{peer.address}?{query}")


async def test_a_server_that_stops_answering_ends_the_call_with_a_timeout(peer_factory) -> None:
    """The first login is answered, then nothing: the request times out, the reconnect's
    login times out too, and the call ends with TASK_TIMEOUT instead of reconnecting for
    ever (reconnection_retries is unlimited)."""
    peer = await peer_factory(lambda connection, number: OK if (connection, number) == (0, 0)
                              else None)
    client = client_of(peer, request_timeout="100ms")
    try:
        await client.connect()
        with pytest.raises(IggyError) as err:
            await asyncio.wait_for(client.ping(), 10)
        assert err.value.code == ErrorCode.TASK_TIMEOUT
        assert peer.connections == 2
    finally:
        await client.close()


async def test_a_frame_announcing_4_gib_is_refused_before_anything_is_allocated(
        peer_factory) -> None:
    """The login's answer claims a 4 GiB payload: the default response_buffer_size refuses
    it from the header (INVALID_BYTES_RESPONSE), nothing is retried (one connection)."""
    peer = await peer_factory(lambda connection, number: struct.pack("<II", 0, 0xFFFFFFFF))
    client = client_of(peer, request_timeout="5s")
    try:
        with pytest.raises(IggyError) as err:
            await client.connect()
        assert err.value.code == ErrorCode.INVALID_BYTES_RESPONSE
        assert "4294967295 bytes" in str(err.value)
        assert peer.connections == 1
    finally:
        await client.close()


async def test_a_sync_call_that_times_out_is_abandoned_and_the_client_goes_on(
        peer_factory) -> None:
    """SyncClient(timeout_s): the first ping gets no answer. The call raises IggyError
    TASK_TIMEOUT and its request is cancelled on the client's loop (the connection it held
    is dropped), so the next call reconnects and is answered."""
    peer = await peer_factory(lambda connection, number: None if (connection, number) == (0, 1)
                              else OK)
    client = await asyncio.to_thread(
        SyncClient, peer.address, username="iggy", password="iggy", timeout_s=0.5,
        heartbeat_interval_s=None, reconnection_interval_s=0.01)
    try:
        with pytest.raises(IggyError) as err:
            await asyncio.to_thread(client.ping)
        assert err.value.code == ErrorCode.TASK_TIMEOUT
        await asyncio.to_thread(client.ping)
        assert peer.connections == 2
    finally:
        await asyncio.to_thread(client.close)
