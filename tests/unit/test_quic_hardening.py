"""What a QUIC peer can do to the server's connection before and after login (review of the QUIC
transport): a reply for a stream the client stopped must not wedge the connection; nothing
the peer sends makes the receive buffers or the flow-control windows grow beyond the
configured windows (a peer sending beyond them is closed with FLOW_CONTROL_ERROR); one frame
on a high stream ID does not create every lower stream.

The server side is a real ``QuicClientProtocol`` (or a bare aioquic connection tuned as the
server's) joined in memory to an aioquic client (``tests.support.quic_pair``); no sockets,
no timers: the event loop is turned with ``asyncio.sleep(0)``.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aioquic import tls
from aioquic.buffer import Buffer
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import QuicErrorCode, QuicPacketType
from aioquic.quic.packet_builder import QuicPacketBuilder

from lurcher.core.connection.framing import REQUEST_HEADER
from lurcher.core.quic import STREAM_WINDOW_BYTES, QuicSettings
from lurcher.core.quic_frames import (MAX_ACK_FRAME_RANGES, MAX_FRAMES_PER_PACKET,
                                     LongFrameQuicConnection)
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.frames import FrameLimits
from lurcher.transports.quic import (MAX_OPEN_ANSWERED_STREAMS, MAX_PENDING_REQUESTS,
                                    MAX_QUEUED_REPLY_BYTES,
                                    MAX_UNFINISHED_STREAMS, QuicClientProtocol, StreamRequests,
                                    queued_reply_bytes)
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair

SETTINGS = QuicSettings()
PING_CODE, SEND_CODE = 1, 101


async def turns(count: int = 20) -> None:
    """Let the event loop run its ready callbacks (deferred transmits, settled replies)."""
    for _ in range(count):
        await asyncio.sleep(0)


class FakeTransport:
    def __init__(self) -> None:
        self.out: list[tuple[bytes, Any]] = []

    def sendto(self, data: Any, addr: Any = None) -> None:
        self.out.append((bytes(data), addr))

    def send_datagrams(self, datagrams: list[Any], addr: Any) -> None:
        self.out += [(bytes(d), addr) for d in datagrams]


class Server:
    """A ``QuicClientProtocol`` on the server end of a pair, with a shard stub whose
    dispatcher answers ``PING_CODE`` at once and every other request with a future the test
    settles (``pending``)."""

    def __init__(self, tmp_path: Path, settings: QuicSettings = SETTINGS) -> None:
        self.client, quic, _, _ = connected_pair(tmp_path, settings, settings)
        self.loop = asyncio.get_running_loop()
        self.dispatched: list[int] = []
        self.pending: list[asyncio.Future] = []
        session = SimpleNamespace(authenticated=True, closed=False, address="peer")
        self.shard = SimpleNamespace(
            limits=SimpleNamespace(frames=FrameLimits(1 << 20, 1 << 20, 1 << 16)),
            open_session=lambda *args: session, close_session=lambda *args, **kw: None,
            dispatcher=SimpleNamespace(dispatch=self.dispatch))
        self.protocol = QuicClientProtocol(quic, shard=self.shard, settings=settings)
        self.transport = FakeTransport()
        self.protocol.connection_made(self.transport)
        self.protocol.peer = CLIENT_ADDR
        self.protocol.open_session()

    def dispatch(self, session: Any, code: int, payload: Any, core: Any) -> Any:
        self.dispatched.append(code)
        if code == PING_CODE:
            return b"pong"
        future = self.loop.create_future()
        self.pending.append(future)
        return future

    async def request(self, stream_id: int, code: int) -> None:
        self.client.send_stream_data(stream_id, REQUEST_HEADER.pack(4 + 3, code) + b"abc",
                                     end_stream=True)
        await self.client_to_server()

    async def client_to_server(self) -> None:
        datagrams = [bytes(d) for d, _ in self.client.datagrams_to_send(self.loop.time())]
        self.protocol.datagrams_received(datagrams, CLIENT_ADDR)
        await turns()

    def server_to_client(self) -> None:
        for data, _ in self.transport.out:
            self.client.receive_datagram(data, SERVER_ADDR, self.loop.time())
        self.transport.out.clear()

    def answer(self, stream_id: int) -> bytes:
        """The reply bytes the client received on ``stream_id`` so far."""
        got = bytearray()
        while (event := self.client.next_event()) is not None:
            if getattr(event, "stream_id", None) == stream_id and hasattr(event, "data"):
                got += event.data
        return bytes(got)


# -- a reply for a stream the client stopped -------------------------------------------------
async def test_a_reply_to_a_stopped_stream_is_dropped_and_the_connection_goes_on(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    await server.request(0, SEND_CODE)
    assert server.protocol.core.busy
    server.client.stop_stream(0, 0)  # the SDK gave up on the request (timeout, cancel)
    await server.client_to_server()

    server.pending[0].set_result(b"too late")
    await turns()
    assert not server.protocol.core.busy
    await server.request(4, PING_CODE)
    server.server_to_client()
    assert server.dispatched == [SEND_CODE, PING_CODE]
    assert server.answer(4).endswith(b"pong")


async def test_a_failed_reply_to_a_stopped_stream_frees_the_connection_too(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    await server.request(0, SEND_CODE)
    server.client.stop_stream(0, 0)
    await server.client_to_server()

    server.pending[0].set_exception(OSError("the write failed"))
    await turns()
    await server.request(4, PING_CODE)
    assert server.dispatched == [SEND_CODE, PING_CODE]


async def test_a_queued_request_whose_stream_was_stopped_does_not_stop_the_next(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    await server.request(0, SEND_CODE)      # busy: the next two requests wait in order
    await server.request(4, PING_CODE)
    server.client.stop_stream(4, 0)
    await server.request(8, PING_CODE)

    server.pending[0].set_result(b"sent")   # the answers of 4 (stopped) and 8 follow
    await turns()
    server.server_to_client()
    assert server.dispatched == [SEND_CODE, PING_CODE, PING_CODE]
    assert not server.protocol.core.busy and not server.protocol.frames.frames
    assert server.answer(8).endswith(b"pong")


async def test_a_refusal_on_a_stopped_stream_is_dropped(tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.client.send_stream_data(0, b"\x01\x00", end_stream=False)  # a partial frame
    server.client.stop_stream(0, 0)
    server.client.send_stream_data(0, b"", end_stream=True)  # ends inside the frame: refused
    await server.client_to_server()
    await server.request(4, PING_CODE)
    assert server.dispatched == [PING_CODE]


# -- receive windows: bounded by the configured windows, whatever the peer sends -------------
def raw_packet(client: Any, frame_type: int, *fields: int, data: bytes = b"") -> bytes:
    """A 1-RTT datagram from ``client`` holding one frame of ``fields`` (varints) and
    ``data``, built by hand (an aioquic client never sends what these tests need)."""
    builder = QuicPacketBuilder(host_cid=client.host_cid, peer_cid=client._peer_cid.cid,
                                version=client._version, is_client=True,
                                max_datagram_size=1200, packet_number=client._packet_number)
    builder.start_packet(QuicPacketType.ONE_RTT, client._cryptos[tls.Epoch.ONE_RTT])
    buf = builder.start_frame(frame_type, capacity=8 * len(fields) + len(data))
    for value in fields:
        buf.push_uint_var(value)
    buf.push_bytes(data)
    datagrams, _ = builder.flush()
    client._packet_number = builder.packet_number
    return bytes(datagrams[0])


STREAM_WITH_OFFSET_AND_LENGTH, RESET_STREAM = 0x08 | 0x04 | 0x02, 0x04


def byte_at(client: Any, stream_id: int, offset: int) -> bytes:
    return raw_packet(client, STREAM_WITH_OFFSET_AND_LENGTH, stream_id, offset, 1, data=b"x")


def server_transmits(server: Any, now: float) -> None:
    """The server sends what it has (its flow-control updates included); nobody listens."""
    server.datagrams_to_send(now)


def closed_with(server: Any) -> Any:
    event = server._close_event
    return None if event is None else event.error_code


def test_a_byte_at_the_end_of_the_window_never_grows_the_streams_window(
        tmp_path: Path) -> None:
    client, server, _, _ = connected_pair(tmp_path, SETTINGS, SETTINGS)
    for round_ in range(4):  # aioquic doubled the window (and the buffer) every round
        server.receive_datagram(byte_at(client, 0, STREAM_WINDOW_BYTES - 1), CLIENT_ADDR,
                                1.0 + round_)
        server_transmits(server, 1.0 + round_)
        stream = server._streams[0]
        assert stream.max_stream_data_local == STREAM_WINDOW_BYTES
        assert len(stream.receiver._buffer) <= STREAM_WINDOW_BYTES
        assert closed_with(server) is None
    server.receive_datagram(byte_at(client, 0, STREAM_WINDOW_BYTES), CLIENT_ADDR, 9.0)
    assert closed_with(server) == QuicErrorCode.FLOW_CONTROL_ERROR


def test_the_connection_window_bounds_the_out_of_order_bytes_of_all_streams(
        tmp_path: Path) -> None:
    window = 1024 * 1024
    small = QuicSettings(receive_window=window)
    client, server, _, _ = connected_pair(tmp_path, small, small)
    server.receive_datagram(byte_at(client, 0, window - 1), CLIENT_ADDR, 1.0)
    server_transmits(server, 1.0)
    assert server._local_max_data.value == window  # nothing was consumed: no more credit
    server.receive_datagram(byte_at(client, 4, 0), CLIENT_ADDR, 2.0)
    assert closed_with(server) == QuicErrorCode.FLOW_CONTROL_ERROR


def test_the_windows_move_with_the_data_delivered(tmp_path: Path) -> None:
    client, server, _, _ = connected_pair(tmp_path, SETTINGS, SETTINGS)
    client._loss._cc.congestion_window = 64 * 1024 * 1024
    sent = 3 * 1024 * 1024
    client.send_stream_data(0, bytes(sent), end_stream=False)
    for step in range(8):
        for data, _ in client.datagrams_to_send(1.0 + step):
            server.receive_datagram(bytes(data), CLIENT_ADDR, 1.0 + step)
        for data, _ in server.datagrams_to_send(1.0 + step):
            client.receive_datagram(bytes(data), SERVER_ADDR, 1.0 + step)
    stream = server._streams[0]
    assert stream.receiver.starting_offset() == sent
    assert stream.max_stream_data_local == sent + STREAM_WINDOW_BYTES
    assert client._streams[0].max_stream_data_remote == sent + STREAM_WINDOW_BYTES
    assert server._local_max_data.value == SETTINGS.receive_window  # over half still left


def test_a_reset_stream_frees_its_buffer_and_its_bytes_count_as_consumed(
        tmp_path: Path) -> None:
    window = 1024 * 1024
    small = QuicSettings(receive_window=window)
    client, server, _, _ = connected_pair(tmp_path, small, small)
    server.receive_datagram(byte_at(client, 0, window - 1), CLIENT_ADDR, 1.0)
    server.receive_datagram(raw_packet(client, RESET_STREAM, 0, 0, window), CLIENT_ADDR, 1.0)
    server_transmits(server, 1.0)
    assert len(server._streams[0].receiver._buffer) == 0
    assert server._local_max_data.value == 2 * window  # all consumed: a full window again
    server.receive_datagram(byte_at(client, 4, 0), CLIENT_ADDR, 2.0)
    assert closed_with(server) is None


# -- streams opened implicitly ---------------------------------------------------------------
def test_a_frame_on_a_high_stream_creates_that_stream_alone(tmp_path: Path) -> None:
    client, server, _, _ = connected_pair(tmp_path, SETTINGS, SETTINGS)
    last = 4 * (SETTINGS.max_concurrent_bidi_streams - 1)
    server.receive_datagram(byte_at(client, last, 0), CLIENT_ADDR, 1.0)
    assert list(server._streams) == [last] and closed_with(server) is None
    server_transmits(server, 1.0)
    # the lower streams are open all the same: data on one arrives, in any order
    server.receive_datagram(byte_at(client, 40, 0), CLIENT_ADDR, 2.0)
    server.receive_datagram(byte_at(client, 0, 0), CLIENT_ADDR, 2.0)
    got = []
    while (event := server.next_event()) is not None:
        if hasattr(event, "data"):
            got.append(event.stream_id)
    assert got == [last, 40, 0] and sorted(server._streams) == [0, 40, last]
    # and the peer's stream limit is what it was
    server.receive_datagram(byte_at(client, last + 4, 0), CLIENT_ADDR, 3.0)
    assert closed_with(server) == QuicErrorCode.STREAM_LIMIT_ERROR


def test_a_finished_stream_stays_finished_among_implicit_ones(tmp_path: Path) -> None:
    client, server, _, _ = connected_pair(tmp_path, SETTINGS, SETTINGS)
    client.send_stream_data(8, b"request", end_stream=True)  # opens 0 and 4 implicitly
    for data, _ in client.datagrams_to_send(1.0):
        server.receive_datagram(bytes(data), CLIENT_ADDR, 1.0)
    server.send_stream_data(8, b"reply", end_stream=True)
    for data, _ in server.datagrams_to_send(1.0):
        client.receive_datagram(bytes(data), SERVER_ADDR, 1.0)
    for data, _ in client.datagrams_to_send(1.1):  # the ACK: stream 8 is finished
        server.receive_datagram(bytes(data), CLIENT_ADDR, 1.1)
    server_transmits(server, 1.2)                  # and discarded
    assert 8 not in server._streams
    server.receive_datagram(byte_at(client, 8, 100), CLIENT_ADDR, 2.0)   # ignored, as aioquic
    server.receive_datagram(byte_at(client, 4, 0), CLIENT_ADDR, 2.0)     # still open
    assert sorted(server._streams) == [4] and closed_with(server) is None


# -- a stream the client resets --------------------------------------------------------------
async def acknowledged_both_ways(server: Server) -> None:
    """Replies (and resets) reach the client, its ACKs (past its ACK delay) reach the
    server, and the server transmits again (where aioquic discards finished streams)."""
    server.protocol.transmit()
    server.server_to_client()
    later = server.loop.time() + 1.0
    acks = [bytes(d) for d, _ in server.client.datagrams_to_send(later)]
    server.protocol.datagrams_received(acks, CLIENT_ADDR)
    await turns()
    server.protocol.transmit()


async def test_a_stream_reset_inside_its_request_is_reset_back_and_discarded(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.client.send_stream_data(0, REQUEST_HEADER.pack(4 + 3, PING_CODE), end_stream=False)
    await server.client_to_server()
    server.client.reset_stream(0, 7)  # the client gave up before finishing its request
    await server.client_to_server()
    await acknowledged_both_ways(server)
    assert 0 not in server.protocol._quic._streams
    assert server.dispatched == []
    await server.request(4, PING_CODE)
    server.server_to_client()
    assert server.answer(4).endswith(b"pong")


async def test_streams_reset_without_a_byte_leave_nothing_behind(tmp_path: Path) -> None:
    server = Server(tmp_path)
    for stream_id in range(0, 400, 4):
        server.client.reset_stream(stream_id, 0)
    await server.client_to_server()
    await acknowledged_both_ways(server)
    assert list(server.protocol._quic._streams) == []
    await server.request(400, PING_CODE)
    server.server_to_client()
    assert server.answer(400).endswith(b"pong")


async def test_reset_streams_give_their_place_back_under_the_stream_limit(
        tmp_path: Path) -> None:
    server = Server(tmp_path, QuicSettings(max_concurrent_bidi_streams=8))
    for round_ in range(3):  # 24 streams reset, never more than 8 open at once
        for stream_id in range(32 * round_, 32 * round_ + 32, 4):
            server.client.reset_stream(stream_id, 0)
        await server.client_to_server()
        await acknowledged_both_ways(server)
        server.server_to_client()  # MAX_STREAMS: the client may open 8 more
    await server.request(96, PING_CODE)
    server.server_to_client()
    assert closed_with(server.protocol._quic) is None
    assert server.answer(96).endswith(b"pong")


# -- a big reply the client gives up on ------------------------------------------------------
async def test_a_stopped_backlogged_reply_lets_the_next_request_run(tmp_path: Path) -> None:
    server = Server(tmp_path)
    await server.request(0, SEND_CODE)
    await server.request(4, PING_CODE)  # waits behind 0
    server.pending[0].set_result(bytes(MAX_QUEUED_REPLY_BYTES + 1))
    await turns()
    assert server.protocol.paused and server.dispatched == [SEND_CODE]
    server.client.stop_stream(0, 0)  # the SDK gave up on request 0: nothing else comes
    await server.client_to_server()
    assert len(server.protocol._quic._streams[0].sender._buffer) == 0  # the reply is let go
    assert not server.protocol.paused
    assert server.dispatched == [SEND_CODE, PING_CODE]
    for _ in range(3):  # the reply's packets in flight are acknowledged: the answer goes
        await acknowledged_both_ways(server)
    server.server_to_client()
    assert server.answer(4).endswith(b"pong")


async def test_a_reset_stream_lets_its_queued_reply_go(tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.client.send_stream_data(0, REQUEST_HEADER.pack(4 + 3, SEND_CODE) + b"abc",
                                   end_stream=False)  # whole, but no FIN
    await server.client_to_server()
    server.pending[0].set_result(bytes(1024 * 1024))
    await turns()
    server.client.reset_stream(0, 0)
    await server.client_to_server()
    assert queued_reply_bytes(server.protocol._quic) == 0


# -- what the request of each stream holds ---------------------------------------------------
def test_answered_streams_do_not_count_as_unfinished_and_partial_ones_are_bounded() -> None:
    requests = StreamRequests(FrameLimits(1 << 20, 1 << 20, 1 << 16), lambda: True)
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for stream_id in range(0, 4 * 1000, 4):  # whole requests, FIN not sent: answered
        assert requests.data(stream_id, ping, end_stream=False) is not None
    assert requests.unfinished() == 0
    first = 4 * 1000
    partial = [first + 4 * i for i in range(MAX_UNFINISHED_STREAMS)]
    for stream_id in partial:
        assert requests.data(stream_id, ping[:3], end_stream=False) is None
    refused = requests.data(first + 4 * MAX_UNFINISHED_STREAMS, ping, end_stream=False)
    assert refused.status == ErrorCode.INVALID_COMMAND and refused.fatal
    requests.reset(partial[0])  # one partial stream less: the next one is read
    assert requests.data(first + 4 * (MAX_UNFINISHED_STREAMS + 1), ping,
                         end_stream=True).code == PING_CODE
    assert requests.data(partial[1], ping[3:], end_stream=True).code == PING_CODE
    for stream_id in range(0, 4 * 1000, 4):  # their FINs come: nothing is left of them
        assert requests.data(stream_id, b"", end_stream=True) is None
    assert requests.unfinished() == MAX_UNFINISHED_STREAMS - 2
    assert len(requests.answered) == 1  # the refused stream, until its FIN or reset


async def test_a_client_leaving_request_streams_open_is_closed(tmp_path: Path) -> None:
    server = Server(tmp_path)
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for i in range(MAX_OPEN_ANSWERED_STREAMS):  # whole requests, FIN never sent
        server.client.send_stream_data(4 * i, ping, end_stream=False)
    await server.client_to_server()
    assert len(server.dispatched) == MAX_OPEN_ANSWERED_STREAMS
    assert closed_with(server.protocol._quic) is None
    server.client.send_stream_data(4 * MAX_OPEN_ANSWERED_STREAMS, ping, end_stream=False)
    await server.client_to_server()
    event = server.protocol._quic._close_event
    assert event is not None and event.reason_phrase == "too many request streams left open"
    assert len(server.dispatched) == MAX_OPEN_ANSWERED_STREAMS


async def test_request_streams_that_end_never_count_as_left_open(tmp_path: Path) -> None:
    server = Server(tmp_path)
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for i in range(4 * MAX_OPEN_ANSWERED_STREAMS):
        server.client.send_stream_data(4 * i, ping, end_stream=False)
        await server.client_to_server()  # the request is taken before its FIN comes
        server.client.send_stream_data(4 * i, b"", end_stream=True)
        await server.client_to_server()
        await acknowledged_both_ways(server)
    assert not server.protocol.requests.answered
    assert closed_with(server.protocol._quic) is None
    assert len(server.dispatched) == 4 * MAX_OPEN_ANSWERED_STREAMS


# -- streams a client keeps from being discarded ---------------------------------------------
def withhold_acks(client: Any) -> None:
    """The client never acknowledges what the server sends (replies, resets)."""
    client._write_ack_frame = lambda *args, **kwargs: None


async def test_streams_whose_replies_are_unacknowledged_hold_their_place(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    held = SETTINGS.max_concurrent_bidi_streams
    withhold_acks(server.client)
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for first in range(0, held + 1, 64):  # answered, never acknowledged, one more
        for i in range(first, min(first + 64, held + 1)):
            server.client.send_stream_data(4 * i, ping, end_stream=True)
        await server.client_to_server()
        server.protocol.transmit()
        server.server_to_client()
    assert len(server.protocol._quic._streams) == held  # the last request waits its turn
    assert len(server.dispatched) == held and closed_with(server.protocol._quic) is None
    del server.client._write_ack_frame  # the client acknowledges: streams are discarded
    await acknowledged_both_ways(server)
    server.server_to_client()  # MAX_STREAMS: the waiting request goes
    await server.client_to_server()
    server.server_to_client()
    assert len(server.dispatched) == held + 1
    assert server.answer(4 * held).endswith(b"pong")


async def test_a_client_opening_streams_beyond_its_limit_is_closed_before_they_run(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.client._remote_max_streams_bidi = 10 * SETTINGS.max_concurrent_bidi_streams
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for i in range(SETTINGS.max_concurrent_bidi_streams + 1):  # one batch of datagrams
        server.client.send_stream_data(4 * i, ping, end_stream=True)
    await server.client_to_server()
    assert closed_with(server.protocol._quic) == QuicErrorCode.STREAM_LIMIT_ERROR
    assert server.dispatched == []  # nothing that came with the violation is served


# -- requests queued when the connection closes -----------------------------------------------
async def queue_behind_a_busy_request(server: Server, queued: int) -> None:
    """One request the core is busy with (its reply pending), ``queued`` more waiting."""
    await server.request(0, SEND_CODE)
    for i in range(1, queued + 1):
        server.client.send_stream_data(4 * i, REQUEST_HEADER.pack(4, PING_CODE),
                                       end_stream=True)
    await server.client_to_server()
    assert server.dispatched == [SEND_CODE] and len(server.protocol.frames) == queued


async def test_requests_queued_past_the_limit_close_the_connection_and_never_run(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    await queue_behind_a_busy_request(server, MAX_PENDING_REQUESTS)
    server.client.send_stream_data(4 * (MAX_PENDING_REQUESTS + 1),
                                   REQUEST_HEADER.pack(4, PING_CODE), end_stream=True)
    await server.client_to_server()
    event = server.protocol._quic._close_event
    assert event is not None and event.reason_phrase == "too many pending requests"
    server.pending[0].set_result(b"stored")  # the busy request ends: nothing queued follows
    await turns()
    assert server.dispatched == [SEND_CODE]
    assert len(server.protocol.frames) == 0


async def test_requests_queued_when_the_server_closes_the_connection_never_run(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    await queue_behind_a_busy_request(server, 5)
    server.protocol.close("server shutting down")
    server.pending[0].set_result(b"stored")
    await turns()
    assert server.dispatched == [SEND_CODE]


async def test_small_replies_are_not_counted_one_by_one(
        tmp_path: Path, monkeypatch: Any) -> None:
    import lurcher.transports.quic as quic_module
    counts: list[int] = []

    def counted(quic: Any) -> int:
        counts.append(queued_reply_bytes(quic))
        return counts[-1]
    monkeypatch.setattr(quic_module, "queued_reply_bytes", counted)
    server = Server(tmp_path)
    withhold_acks(server.client)
    ping = REQUEST_HEADER.pack(4, PING_CODE)
    for i in range(200):  # each reply walked every stream held: quadratic in one batch
        server.client.send_stream_data(4 * i, ping, end_stream=True)
    await server.client_to_server()
    assert len(server.dispatched) == 200 and counts == []
    await server.request(800, SEND_CODE)  # a big reply makes the bound reach the mark
    server.pending[0].set_result(bytes(MAX_QUEUED_REPLY_BYTES))
    await turns()
    assert counts and counts[-1] >= MAX_QUEUED_REPLY_BYTES and server.protocol.paused


def ack_frame(ranges: int, largest: int = 600) -> bytes:
    """An ACK frame body of ``ranges`` one-packet ranges, a gap of one between each."""
    body = Buffer(capacity=16 + 2 * ranges)
    for value in (largest, 0, ranges - 1, 0, *([0, 0] * (ranges - 1))):
        body.push_uint_var(value)
    return body.data


async def test_an_ack_frame_of_too_many_ranges_closes_the_connection(tmp_path: Path) -> None:
    """aioquic parses ACK ranges in time quadratic in their number: a peer's frame of more
    than MAX_ACK_FRAME_RANGES closes it before they are parsed; one of that many is taken."""
    server = Server(tmp_path)
    server.protocol.datagrams_received(
        [raw_packet(server.client, 0x02, data=ack_frame(MAX_ACK_FRAME_RANGES))], CLIENT_ADDR)
    await turns()
    assert not server.protocol.closing()
    server.protocol.datagrams_received(
        [raw_packet(server.client, 0x02, data=ack_frame(MAX_ACK_FRAME_RANGES + 1))], CLIENT_ADDR)
    await turns()
    assert server.protocol.closing()
    close = server.protocol._quic._close_event
    assert close.error_code == QuicErrorCode.PROTOCOL_VIOLATION
    assert close.reason_phrase == f"an ACK frame of {MAX_ACK_FRAME_RANGES + 1} ranges (at most 256)"


async def test_a_packet_of_too_many_frames_closes_the_connection(tmp_path: Path) -> None:
    """aioquic handles each frame in Python: a packet of more than MAX_FRAMES_PER_PACKET
    frames (one-byte PINGs here) closes the connection at the first frame beyond; a packet
    of that many is taken, and so is the next one (the count is per packet)."""
    server = Server(tmp_path)
    pings = bytes([0x01]) * (MAX_FRAMES_PER_PACKET - 1)  # after raw_packet's own PING
    for _ in range(2):
        server.protocol.datagrams_received([raw_packet(server.client, 0x01, data=pings)],
                                           CLIENT_ADDR)
        await turns()
        assert not server.protocol.closing()
    server.protocol.datagrams_received(
        [raw_packet(server.client, 0x01, data=pings + bytes([0x01]))], CLIENT_ADDR)
    await turns()
    assert server.protocol.closing()
    close = server.protocol._quic._close_event
    assert close.error_code == QuicErrorCode.PROTOCOL_VIOLATION
    assert close.reason_phrase == "too many frames in one packet"


def test_the_frame_count_wraps_the_pinned_payload_loop() -> None:
    """``LongFrameQuicConnection._payload_received`` starts the count and calls aioquic's,
    whose loop calls each handler of the (wrapped) table once per frame."""
    ours = inspect.signature(LongFrameQuicConnection._payload_received)
    theirs = inspect.signature(QuicConnection._payload_received)
    assert list(ours.parameters) == list(theirs.parameters)
    source = inspect.getsource(QuicConnection._payload_received)
    assert "= self.__frame_handlers[frame_type]" in source
    assert "frame_handler(context, frame_type, buf)" in source
