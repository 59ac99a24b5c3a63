"""Issue 14, point 3 over QUIC: a connection's unread replies and unfinished requests are bounded.

A raw aioquic client logs in, pipelines ``POLLS`` polls of a partition larger than the poll
reply cap (each answered with ``REPLY_CAP`` bytes) on separate streams, then holds every
datagram the server sends it without processing it, so it sends no ACK and grants no credit
(it only pings, so the connection stays alive). The server must not hand more replies to
aioquic while the unacknowledged ones are above ``MAX_QUEUED_REPLY_BYTES``: its RSS grows by
less than ``GROWTH_BOUND`` (before the fix every reply was queued: ``POLLS * REPLY_CAP`` =
128 MiB), while another QUIC client keeps getting answers. Once the client processes its
datagrams again, every reply arrives whole.

A client opening more than ``MAX_UNFINISHED_STREAMS`` streams that each hold a partial request
gets InvalidCommand on the streams beyond; the connection survives and works again once its
unfinished streams are gone.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
import struct
from typing import Any

import pytest
from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamDataReceived

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.transports.quic import (MAX_PENDING_REQUESTS, MAX_QUEUED_REPLY_BYTES,
                                     MAX_UNFINISHED_STREAMS)
from tests.integration.test_hardening_frames import server_rss
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory
from tests.transports.conftest import ALL_ON

KIB, MIB = 1024, 1024 * 1024
REPLY_CAP = 8 * MIB
POLLS = 16
GROWTH_BOUND = 64 * MIB  # MAX_QUEUED_REPLY_BYTES + one reply + transient copies
BATCHES, PER_BATCH, PAYLOAD = 12, 10, 100 * KIB  # ~12 MiB in one partition
U32_MAX = 2**32 - 1
ANSWER_WITHIN_S = 60.0
PAUSE_S = 8.0
KEEPALIVE_S = 1.0
RESPONSE_HEADER = struct.Struct("<II")


class RawQuic(QuicConnectionProtocol):
    """One request per stream; can hold incoming datagrams unprocessed (``pause``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: list[tuple[Any, Any]] | None = None
        self.bodies: dict[int, bytearray] = {}
        self.answers: dict[int, asyncio.Future[bytes]] = {}
        self.closed_reason: str | None = None

    def datagram_received(self, data: Any, addr: Any) -> None:
        if self.held is not None:
            self.held.append((data, addr))
        else:
            super().datagram_received(data, addr)

    def pause(self) -> None:
        self.held = []

    def resume(self) -> None:
        held, self.held = self.held or [], None
        for data, addr in held:
            super().datagram_received(data, addr)

    def keepalive(self) -> None:
        self._quic.send_ping(0)
        self.transmit()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
            answer = self.answers.get(event.stream_id)
            if event.end_stream and answer is not None and not answer.done():
                answer.set_result(bytes(self.bodies.pop(event.stream_id)))
        elif isinstance(event, ConnectionTerminated):
            self.closed_reason = event.reason_phrase
            for answer in self.answers.values():
                if not answer.done():
                    answer.set_exception(ConnectionError(event.reason_phrase))

    def start(self, request: bytes, end: bool = True, send: bool = True) -> int:
        stream_id = self._quic.get_next_available_stream_id()
        self.answers[stream_id] = asyncio.get_running_loop().create_future()
        self._quic.send_stream_data(stream_id, request, end_stream=end)
        if send:
            self.transmit()
        return stream_id

    async def call(self, code: int, payload: bytes = b"") -> tuple[int, bytes]:
        stream_id = self.start(frame(code, payload))
        return split(await asyncio.wait_for(self.answers[stream_id], ANSWER_WITHIN_S))


def frame(code: int, payload: bytes = b"") -> bytes:
    return struct.pack("<II", 4 + len(payload), code) + payload


def split(reply: bytes) -> tuple[int, bytes]:
    status, length = RESPONSE_HEADER.unpack_from(reply)
    body = reply[RESPONSE_HEADER.size:]
    assert len(body) == length, f"reply of {len(body)} bytes announced {length}"
    return status, body


def client_config() -> QuicConfiguration:
    config = QuicConfiguration(is_client=True, alpn_protocols=None, server_name="localhost",
                               idle_timeout=60.0)
    config.verify_mode = ssl.CERT_NONE
    return config


def quic_host_port(server: LurcherServer) -> tuple[str, int]:
    host, port = server.endpoints["quic"].rsplit(":", 1)
    return host, int(port)


async def logged_in(protocol: RawQuic) -> None:
    status, _ = await protocol.call(raw.LOGIN_USER, raw.login_payload("iggy", "iggy"))
    assert status == 0


def fill(server: LurcherServer) -> None:
    with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as admin:
        admin.login()
        admin.create_stream("bp")
        admin.create_topic("bp", "t", 1)
        for b in range(BATCHES):
            admin.send("bp", "t", raw.partition_id(0),
                       [raw.message(bytes([b % 251]) * PAYLOAD) for _ in range(PER_BATCH)])


async def keep_alive(protocol: RawQuic, seconds: float) -> None:
    for _ in range(int(seconds / KEEPALIVE_S)):
        protocol.keepalive()
        await asyncio.sleep(KEEPALIVE_S)


POLL = frame(raw.POLL_MESSAGES, raw.poll_payload("bp", "t", 0, raw.STRATEGY_FIRST, 0, U32_MAX))


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    """1 shard, poll replies capped at ``REPLY_CAP``, one partition larger than that."""
    server = LurcherServer().start(tmp_path_factory.mktemp("quic-bp"),
                                   {**ALL_ON, "LURCHER_SYSTEM_SHARDING_SHARDS": "1",
                                    "LURCHER_LIMITS_MAX_POLL_REPLY_BYTES": str(REPLY_CAP)})
    try:
        fill(server)
        yield server
    finally:
        server.close()


@pytest.mark.slow
async def test_unread_quic_replies_are_held_back(filled: LurcherServer) -> None:
    server = filled
    host, port = quic_host_port(server)
    async with connect(host, port, configuration=client_config(),
                       create_protocol=RawQuic) as slow, \
            connect(host, port, configuration=client_config(), create_protocol=RawQuic) as other:
        assert isinstance(slow, RawQuic) and isinstance(other, RawQuic)
        await logged_in(slow)
        await logged_in(other)
        before = server_rss(server)
        slow.pause()
        streams = [slow.start(POLL) for _ in range(POLLS)]
        peak = before
        for _ in range(int(PAUSE_S / KEEPALIVE_S)):
            await keep_alive(slow, KEEPALIVE_S)
            status, _ = await other.call(raw.PING)
            assert status == 0, "another client must keep getting answers"
            peak = max(peak, server_rss(server))
        grown = peak - before
        print(f"QUIC slow reader: server RSS {before / MIB:.0f} MiB, peak +{grown / MIB:.0f} MiB")
        assert grown < GROWTH_BOUND, f"server RSS grew {grown / MIB:.0f} MiB"
        slow.resume()
        replies = [await asyncio.wait_for(slow.answers[s], ANSWER_WITHIN_S * 3)
                   for s in streams]
    bodies = [split(reply) for reply in replies]
    assert all(status == 0 for status, _ in bodies)
    first = bodies[0][1]
    _, _, count = struct.unpack_from("<IQI", first)
    assert count >= 1 and len(first) <= REPLY_CAP + 4 * KIB
    assert all(body == first for _, body in bodies), "every reply arrives whole"
    assert MAX_QUEUED_REPLY_BYTES + REPLY_CAP < GROWTH_BOUND


@pytest.mark.slow
async def test_too_many_waiting_requests_close_the_connection(filled: LurcherServer) -> None:
    host, port = quic_host_port(filled)
    async with connect(host, port, configuration=client_config(),
                       create_protocol=RawQuic) as slow:
        assert isinstance(slow, RawQuic)
        await logged_in(slow)
        slow.pause()
        streams = [slow.start(POLL, send=False) for _ in range(MAX_PENDING_REQUESTS + 4)]
        slow.transmit()  # in as few packets as possible: the paused client sees no ACKs
        await keep_alive(slow, PAUSE_S / 2)
        slow.resume()
        with pytest.raises(ConnectionError, match="too many pending requests"):
            await asyncio.wait_for(slow.answers[streams[-1]], ANSWER_WITHIN_S)
        assert slow.closed_reason == "too many pending requests"
        for stream_id in streams:  # outcomes retrieved, not reported by the GC as lost
            if slow.answers[stream_id].done():
                slow.answers[stream_id].exception()


async def test_unfinished_request_streams_are_capped(server_factory: ServerFactory) -> None:
    server = server_factory({**ALL_ON, "LURCHER_SYSTEM_SHARDING_SHARDS": "1"})
    host, port = quic_host_port(server)
    partial = (struct.pack("<II", 4 + 60 * MIB, raw.SEND_MESSAGES) + b"\0" * (256 * KIB))
    async with connect(host, port, configuration=client_config(),
                       create_protocol=RawQuic) as client:
        assert isinstance(client, RawQuic)
        await logged_in(client)
        unfinished = [client.start(partial, end=False) for _ in range(MAX_UNFINISHED_STREAMS)]
        extra = [client.start(partial, end=False) for _ in range(8)]
        for stream_id in extra:
            status, _ = split(await asyncio.wait_for(client.answers[stream_id], ANSWER_WITHIN_S))
            assert status == ErrorCode.INVALID_COMMAND
        status, _ = await client.call(raw.PING)
        assert status == ErrorCode.INVALID_COMMAND, "a ping beyond the cap is refused too"
        for stream_id in unfinished:
            client._quic.reset_stream(stream_id, 0)
        client.transmit()
        status, _ = await client.call(raw.PING)
        assert status == 0, "the connection works again once its unfinished streams are gone"
        assert client.closed_reason is None
