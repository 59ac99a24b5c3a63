"""Issue 14, point 3: one poll reply holds at most ``limits.max_poll_reply_bytes`` of messages,
on every transport (TCP, WebSocket, QUIC, HTTP).

A poll of count 4,294,967,295 (u32 max, "everything") over a partition larger than the cap is
answered with fewer messages, whose stored bytes fit the cap; polling on from the next offset
returns every message exactly once, in order. A single message larger than the cap is still
answered (alone), so a consumer never gets stuck.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lurcher.sdk.client import Client
from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON, make_client

CAP = 1024 * 1024
U32_MAX = 2**32 - 1
PAYLOAD = 100_000
STORED_HEADER = 64
MESSAGES = 30


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    server = LurcherServer().start(tmp_path_factory.mktemp("capped"),
                                   {**ALL_ON, "LURCHER_LIMITS_MAX_POLL_REPLY_BYTES": str(CAP)})
    try:
        yield server
    finally:
        server.close()


def payload(i: int, size: int = PAYLOAD) -> bytes:
    return bytes([i % 251]) * size


async def connected(server: LurcherServer, transport: str) -> Client:
    client = make_client(server, transport, None, username="iggy", password="iggy")
    await client.connect()
    return client


@pytest.mark.parametrize("transport", ["tcp", "ws", "quic", "http"])
async def test_a_poll_of_everything_is_cut_to_the_byte_cap(capped_server: LurcherServer,
                                                           transport: str) -> None:
    client = await connected(capped_server, transport)
    try:
        stream = f"cap-{transport}"
        await client.create_stream(stream)
        await client.create_topic(stream, "t", 1)
        for start in range(0, MESSAGES, 10):
            await client.send_messages(stream, "t", [payload(i) for i in range(start, start + 10)],
                                       0)
        first = await client.poll_messages(stream, "t", 0, "first", U32_MAX)
        got = list(first.messages())
        assert 1 <= len(got) < MESSAGES, f"{len(got)} messages in one reply"
        assert len(got) * (STORED_HEADER + PAYLOAD) <= CAP
        offset = got[-1].offset + 1
        while offset < MESSAGES:
            more = list((await client.poll_messages(stream, "t", 0, offset, U32_MAX)).messages())
            assert more, f"no progress at offset {offset}"
            assert len(more) * (STORED_HEADER + PAYLOAD) <= CAP
            got += more
            offset = more[-1].offset + 1
        assert [m.offset for m in got] == list(range(MESSAGES))
        assert [m.payload for m in got] == [payload(i) for i in range(MESSAGES)]
    finally:
        await client.close()


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_a_message_larger_than_the_cap_is_answered_alone(capped_server: LurcherServer,
                                                               transport: str) -> None:
    client = await connected(capped_server, transport)
    try:
        stream = f"cap-big-{transport}"
        await client.create_stream(stream)
        await client.create_topic(stream, "t", 1)
        await client.send_messages(stream, "t", [payload(1, CAP + CAP // 2), payload(2)], 0)
        polled = list((await client.poll_messages(stream, "t", 0, "first", U32_MAX)).messages())
        assert [m.payload for m in polled] == [payload(1, CAP + CAP // 2)]
        rest = list((await client.poll_messages(stream, "t", 0, 1, U32_MAX)).messages())
        assert [m.payload for m in rest] == [payload(2)]
    finally:
        await client.close()


async def test_large_replies_over_tls_are_sent_in_chunks_intact(tls_server: LurcherServer,
                                                                test_ca) -> None:
    """Over TLS (no sendfile) stored bytes go out in bounded chunks; the reply is whole."""
    client = make_client(tls_server, "tcp-tls", test_ca, username="iggy", password="iggy")
    await client.connect()
    try:
        await client.create_stream("tls-chunks")
        await client.create_topic("tls-chunks", "t", 1)
        for start in range(0, MESSAGES, 10):
            await client.send_messages("tls-chunks", "t",
                                       [payload(i) for i in range(start, start + 10)], 0)
        got = list((await client.poll_messages("tls-chunks", "t", 0, "first", U32_MAX)).messages())
        assert [m.payload for m in got] == [payload(i) for i in range(MESSAGES)]
    finally:
        await client.close()
