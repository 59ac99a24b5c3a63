"""The HTTP transport against a peer (a server or a proxy) that answers bodies no Iggy
server would: the SDK reads an answer's body up to ``response_buffer_size``, as the binary
transports read a frame, and fails the request with INVALID_BYTES_RESPONSE past it. A tiny
fake HTTP/1.1 peer on 127.0.0.1 answers ``/ping`` with 200 and every other request with
``answer`` (raw bytes: status line, headers, body), then closes the connection."""

from __future__ import annotations

import asyncio
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from lurcher.sdk import Client, ErrorCode, IggyError
from tests.sdk.conftest import raised_within
from tests.support.fake_peer import FakePeer, peers

PONG = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\npong"
LIMIT = 100_000


class FakeHttpPeer(FakePeer):
    """``pace_s``: the answer is sent a byte at a time, that far apart."""

    def __init__(self, answer: bytes, pace_s: float = 0.0) -> None:
        super().__init__()
        self.answer = answer
        self.pace_s = pace_s

    async def serve(self, connection: int, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(_content_length(head))
            if not head.startswith(b"GET /ping "):
                break
            writer.write(PONG)
        await self._write(writer, self.answer)
        writer.close()

    async def _write(self, writer: asyncio.StreamWriter, answer: bytes) -> None:
        pieces = [answer[i:i + 1] for i in range(len(answer))] if self.pace_s else [answer]
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(self.pace_s)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest_asyncio.fixture
async def http_peer() -> AsyncIterator[Callable[..., "asyncio.Future[FakeHttpPeer]"]]:
    async for start in peers(FakeHttpPeer):
        yield start


def chunked(body: bytes, piece: int = 16_384) -> bytes:
    chunks = [b"%x\r\n%s\r\n" % (len(body[i:i + piece]), body[i:i + piece])
              for i in range(0, len(body), piece)]
    return b"".join(chunks) + b"0\r\n\r\n"


ANSWERS = {
    # The header claims 4 GiB and the peer then closes: refused from the header.
    "content-length": (b"HTTP/1.1 200 OK\r\ncontent-length: 4294967296\r\n\r\n",
                       "4294967296 bytes"),
    # No length announced: a 1 MiB chunked body is refused once LIMIT bytes are in.
    "chunked": (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                + chunked(b"[" + b"0," * 500_000 + b"0]"), "exceeds response_buffer_size"),
}


@pytest.mark.parametrize("kind", ANSWERS)
async def test_a_body_over_the_response_buffer_size_is_refused(http_peer, kind: str) -> None:
    answer, detail = ANSWERS[kind]
    peer = await http_peer(answer)
    client = Client.from_connection_string(
        f"iggy+http://iggy:iggy@{peer.address}?response_buffer_size={LIMIT}"
        "&heartbeat_interval=1h&request_timeout=10s")
    try:
        with pytest.raises(IggyError) as err:
            await asyncio.wait_for(client.connect(), 30)
        assert err.value.code == ErrorCode.INVALID_BYTES_RESPONSE
        assert detail in str(err.value) and f"({LIMIT})" in str(err.value)
    finally:
        await client.close()


def json_answer(status: int, body: str) -> bytes:
    return b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status, len(body), body.encode())


ODD_LOGIN_ANSWERS = {
    "a list": (json_answer(200, "[]"), ErrorCode.INVALID_JSON_RESPONSE),
    "a user id below 0": (json_answer(200, '{"user_id": -1}'), ErrorCode.INVALID_JSON_RESPONSE),
    "a user id over u32": (json_answer(200, '{"user_id": 4294967296}'), ErrorCode.INVALID_JSON_RESPONSE),
    "an error id of 1e400": (json_answer(400, '{"id": 1e400}'), ErrorCode.HTTP_RESPONSE_ERROR),
    "an error id below 0": (json_answer(400, '{"id": -5}'), ErrorCode.HTTP_RESPONSE_ERROR),
    "an error id over u32": (json_answer(400, '{"id": 4294967296}'),
                             ErrorCode.HTTP_RESPONSE_ERROR),
}


@pytest.mark.parametrize("kind", ODD_LOGIN_ANSWERS)
async def test_a_json_answer_of_another_shape_is_an_iggy_error(http_peer, kind: str) -> None:
    """A JSON answer no Iggy server gives fails with an IggyError naming the problem (it was
    AttributeError, struct.error or OverflowError; an error id out of the u32 range became
    an IggyError of that code)."""
    answer, code = ODD_LOGIN_ANSWERS[kind]
    peer = await http_peer(answer)
    client = Client.from_connection_string(
        f"iggy+http://iggy:iggy@{peer.address}?heartbeat_interval=1h&request_timeout=10s")
    try:
        with pytest.raises(IggyError) as err:
            await asyncio.wait_for(client.connect(), 30)
        assert err.value.code == code
    finally:
        await client.close()


async def test_a_login_answer_whose_token_is_not_an_object_logs_in_without_one(
        http_peer) -> None:
    peer = await http_peer(json_answer(200, '{"user_id": 7, "access_token": "x"}'))
    client = Client.from_connection_string(
        f"iggy+http://iggy:iggy@{peer.address}?heartbeat_interval=1h&request_timeout=10s")
    try:
        await asyncio.wait_for(client.connect(), 30)
        assert client._conn.token is None
    finally:
        await client.close()


async def test_an_answer_trickled_past_the_request_timeout_ends_the_request(http_peer) -> None:
    """request_timeout bounds the whole exchange: httpx's own timeout bounds each read, so
    a login answer arriving a byte every 0.2 s (about 16 s in all) was waited for to its
    end with request_timeout=1s."""
    body = '{"user_id": 0}' + " " * 40
    peer = await http_peer(json_answer(200, body), 0.2)
    client = Client.from_connection_string(
        f"iggy+http://iggy:iggy@{peer.address}?heartbeat_interval=1h&request_timeout=1s")
    try:
        error = await raised_within(client.connect(), 40)
        assert isinstance(error, IggyError) and error.code == ErrorCode.TASK_TIMEOUT
    finally:
        await client.close()


def encoded_answer(coding: str, body: bytes) -> bytes:
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: %s\r\n"
            b"content-length: %d\r\n\r\n")
    return head % (coding.encode(), len(body)) + body


def compressed(coding: str, parts: list[bytes] | bytes, repeat: int = 1) -> bytes:
    """``parts`` (``repeat`` times over) in ``coding``: gzip, zlib-wrapped or raw deflate."""
    wbits = {"gzip": 31, "deflate": 15, "raw deflate": -15}[coding]
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    chunks = [packer.compress(part) for _ in range(repeat)
              for part in ([parts] if isinstance(parts, bytes) else parts)]
    return b"".join(chunks) + packer.flush()


def peer_client(peer: FakeHttpPeer, options: str = "") -> Client:
    return Client.from_connection_string(
        f"iggy+http://iggy:iggy@{peer.address}?heartbeat_interval=1h&request_timeout=10s"
        + options)


async def login_error(client: Client) -> IggyError:
    """The IggyError ``client.connect()`` fails with (the client is closed)."""
    try:
        with pytest.raises(IggyError) as err:
            await asyncio.wait_for(client.connect(), 30)
    finally:
        await client.close()
    return err.value


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_bomb_is_refused_before_it_is_decoded(http_peer, coding: str) -> None:
    """A login answer of 64 MiB of zeros compressed to 65 kB (under the bound, so its
    Content-Length passed) was decoded a network read at a time by httpx, each read whole:
    64 MiB in memory at once before the bound was checked, against a bound of 100 kB. Now
    decoding stops at the bound plus one byte."""
    bomb = compressed(coding, b"\0" * (1 << 20), repeat=64)
    assert len(bomb) < LIMIT
    peer = await http_peer(encoded_answer(coding, bomb))
    tracemalloc.start()
    try:
        error = await login_error(peer_client(peer, f"&response_buffer_size={LIMIT}"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.code == ErrorCode.INVALID_BYTES_RESPONSE
    assert f"response of {LIMIT + 1} bytes exceeds response_buffer_size ({LIMIT})" in str(error)
    assert peak < 32 * 2**20, f"{peak} bytes traced while refusing a {len(bomb)}-byte bomb"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw deflate", "identity"])
async def test_a_compressed_answer_within_the_bound_is_read(http_peer, coding: str) -> None:
    login = b'{"user_id": 7, "access_token": {"token": "jwt", "expiry": 0}}'
    body = login if coding == "identity" else compressed(coding, [login[:9], login[9:]])
    peer = await http_peer(encoded_answer(coding.replace("raw ", ""), body))
    client = peer_client(peer, f"&response_buffer_size={LIMIT}")
    try:
        await asyncio.wait_for(client.connect(), 30)
        assert client._conn.token == "jwt"
    finally:
        await client.close()


@pytest.mark.parametrize("coding,body", [("br", b"\x0b\x02\x80{}\x03"),
                                         ("gzip", b"not gzip at all")])
async def test_a_body_in_a_coding_not_asked_for_or_broken_is_refused(
        http_peer, coding: str, body: bytes) -> None:
    peer = await http_peer(encoded_answer(coding, body))
    error = await login_error(peer_client(peer, "&retries=0"))
    assert error.code == ErrorCode.INVALID_BYTES_RESPONSE, error
