"""STREAM frames longer than 16,383 bytes for aioquic (``LongFrameQuicConnection``).

Owns: the overrides of aioquic's ``QuicConnection``. ``send_stream_data`` hands a write to a
stream whose send buffer is empty over without copying it (``lurcher.core.quic_send``).
aioquic's private ``_write_stream_frame`` writes a STREAM frame's length as a 2-byte varint
(at most 16,383 bytes) and so caps the useful datagram size; the override writes it as a
4-byte varint (RFC 9000 §16: any encoding is valid, the peer reads the prefix), so one
STREAM frame fills a datagram of up to ``MAX_DATAGRAM_BYTES`` (the largest IPv4 UDP
payload). A large frame's data is taken from a held send buffer as a view (``held_frame``,
aioquic's ``get_frame`` without its copy) and attached to the packet instead of copied into
it, when the packet builder can (``lurcher.core.quic_builder``). A steady connection builds
its 1-RTT packets without checking for frames that cannot be pending
(``lurcher.core.quic_steady``), full STREAM packets of one stream in runs
(``lurcher.core.quic_run``), receives one-packet 1-RTT datagrams without aioquic's
general header parsing and path checks (``lurcher.core.quic_receive``), hands the in-order
STREAM data of datagrams read together up once (``receive_datagrams``,
``lurcher.core.quic_receive_run``), and tells a stream
the bytes an ACK acknowledged in one call per run of packets (``lurcher.core.quic_recovery``).
The receive windows move with the data consumed instead of doubling, and a new stream is
created alone, not with every lower one it opens (``lurcher.core.quic_flow``). The peer's
``max_udp_payload_size`` is kept (``peer_max_udp_payload``). A steady build that hands
datagrams out early and then fails closes the connection (``_abandon``), except when it ends
with aioquic's ``QuicPacketBuilderStop`` (a full congestion window or anti-amplification
budget), after which aioquic registers every packet built.
Every other step is aioquic's.

Invariants: aioquic is pinned to one version in pyproject.toml (``AIOQUIC_VERSION``); the
overridden methods' signatures and the frame type bits it relies on are checked by
tests/unit/test_quic_frames.py, which fails loudly if an aioquic upgrade changes them.
A connection becomes a ``LongFrameQuicConnection`` by ``use_long_frames`` (aioquic creates
its connections itself, client and server, so the class is swapped on the instance).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from aioquic.buffer import Buffer, size_uint_var
from aioquic.quic.connection import QuicConnection, QuicConnectionError
from aioquic.quic.packet import (QuicErrorCode, QuicFrameType, QuicStreamFrame,
                                  pull_quic_transport_parameters)
from aioquic.quic.packet_builder import QuicPacketBuilderStop

from lurcher.core.quic_builder import ATTACH_MIN_BYTES, LeanPacketBuilder, use_lean_builder
from lurcher.core.quic_flow import (init_flow, open_stream, write_connection_limits,
                                    write_stream_limits)
from lurcher.core.quic_receive import receive_steady
from lurcher.core.quic_receive_run import receive_datagrams
from lurcher.core.quic_recovery import lean_recovery
from lurcher.core.quic_run import (LENGTH_BYTES, LENGTH_PREFIX, STREAM_FRAME_FIN_BIT,
                                   STREAM_FRAME_LENGTH_BIT, STREAM_FRAME_OFFSET_BIT)
from lurcher.core.quic_send import HeldBytes, StreamParts
from lurcher.core.quic_steady import steady, write_steady

AIOQUIC_VERSION = "1.7.2"
MAX_DATAGRAM_BYTES = 65_507  # 65,535 - 20 (IPv4 header) - 8 (UDP header)
PEER_MAX_UDP_PAYLOAD_DEFAULT = 65_527  # RFC 9000 §18.2: when the peer announces none
MAX_ACK_FRAME_RANGES = 256  # in one ACK frame of the peer (aioquic itself sends at most 64)
# Frames in one packet of the peer. aioquic handles each frame in Python (a few µs): a 60 KB
# datagram of one-byte frames held the event loop for about 90 ms. A sender puts a few
# frames per stream it writes to in a packet (data, flow control, stop or reset), and a few
# more: the bound is MAX_FRAMES_PER_PACKET, or FRAMES_PER_STREAM for each stream the peer
# may open (``frames_per_packet``, set by ``QuicTuning``) if more, and FRAMES_PER_STREAM
# for each stream that exists (those this end opened are not in that limit).
MAX_FRAMES_PER_PACKET = 1_024
FRAMES_PER_STREAM = 4


class LongFrameQuicConnection(QuicConnection):
    """aioquic's connection whose STREAM frames carry a 4-byte length and whose stream
    writes are held, not copied, when the stream's send buffer is empty.

    ``early_send`` (set by the owner; None: not used) takes datagrams a steady build hands
    out every ``early_bytes`` while it builds the rest (``LeanPacketBuilder.send_early``).
    """

    early_send: Callable[[list[bytearray]], None] | None = None
    early_bytes = 0
    peer_max_udp_payload = PEER_MAX_UDP_PAYLOAD_DEFAULT  # the peer's max_udp_payload_size
    frames_per_packet = MAX_FRAMES_PER_PACKET  # allowed, besides FRAMES_PER_STREAM per stream
    frames_left = MAX_FRAMES_PER_PACKET  # in the packet being handled (``bound_frames``)

    def _payload_received(self, context: Any, plain: bytes,
                          crypto_frame_required: bool = False) -> tuple[bool, bool]:
        """aioquic's, with the count of the packet's frames started (``bound_frames``)."""
        self.frames_left = self.frames_per_packet + FRAMES_PER_STREAM * len(self._streams)
        return super()._payload_received(context, plain, crypto_frame_required)

    def _parse_transport_parameters(self, data: bytes, from_session_ticket: bool = False) -> None:
        """aioquic's, which checks the peer's ``max_udp_payload_size`` but does not keep
        it; kept here as ``peer_max_udp_payload`` (``lurcher.core.quic.QuicTuning`` never
        sends larger datagrams)."""
        super()._parse_transport_parameters(data, from_session_ticket)
        if not from_session_ticket:
            announced = pull_quic_transport_parameters(Buffer(data=data)).max_udp_payload_size
            self.peer_max_udp_payload = announced or PEER_MAX_UDP_PAYLOAD_DEFAULT

    def send_stream_data(self, stream_id: int, data: Any, end_stream: bool = False) -> None:
        """aioquic's, except that ``data`` (bytes-like, or a ``StreamParts``) is kept as it
        is when nothing else is queued on the stream: the caller must never change a
        bytes-like ``data`` afterwards (``StreamParts`` holds only what cannot change)."""
        stream = self._get_or_create_stream_for_send(stream_id)
        sender = stream.sender
        if data and not sender._buffer and type(sender._buffer) is bytearray:
            sender._buffer = HeldBytes()
        elif isinstance(data, StreamParts) and type(sender._buffer) is bytearray:
            data = data.joined()  # aioquic's own buffer appends bytes
        sender.write(data, end_stream=end_stream)

    def receive_datagram(self, data: bytes, addr: Any, now: float) -> None:
        """aioquic's, or its short form for one 1-RTT packet of a steady connection
        (``lurcher.core.quic_receive``)."""
        if not receive_steady(self, data, addr, now):
            super().receive_datagram(data, addr, now)

    def receive_datagrams(self, datagrams: list[Any], addr: Any, now: float) -> None:
        """Datagrams read together, each received as ``receive_datagram`` would, with the
        in-order STREAM data of a run handed up once (``lurcher.core.quic_receive_run``)."""
        receive_datagrams(self, datagrams, addr, now)

    def _get_or_create_stream(self, frame_type: int, stream_id: int) -> Any:
        """aioquic's, creating a new stream alone, not every lower one it opens
        (``lurcher.core.quic_flow``)."""
        return open_stream(self, frame_type, stream_id, QuicConnection._get_or_create_stream)

    def _write_connection_limits(self, builder: Any, space: Any) -> None:
        """aioquic's, with MAX_DATA moved by the bytes consumed (``lurcher.core.quic_flow``)."""
        write_connection_limits(self, builder)

    def _write_stream_limits(self, builder: Any, space: Any, stream: Any) -> None:
        """aioquic's, with MAX_STREAM_DATA moved by the bytes the stream delivered
        (``lurcher.core.quic_flow``)."""
        write_stream_limits(self, builder, stream)

    def _write_application(self, builder: Any, network_path: Any, now: float) -> None:
        """aioquic's, or its loop without the rare frames when none is pending
        (``lurcher.core.quic_steady``)."""
        if steady(self, network_path):
            early = self.early_send is not None and isinstance(builder, LeanPacketBuilder)
            if early:
                builder.send_early(self.early_send, self.early_bytes)
            try:
                write_steady(self, builder, now)
            except QuicPacketBuilderStop:
                raise  # how a build ends normally: aioquic registers every packet built
            except BaseException:
                if early and builder.handed_early:
                    self._abandon(builder)
                raise
        else:
            super()._write_application(builder, network_path, now)

    def _abandon(self, builder: LeanPacketBuilder) -> None:
        """A build failed after some of its datagrams left: aioquic will not register their
        packets, so their data would never be sent again. Never reuse their packet numbers
        (an AES-GCM nonce must not repeat under one key) and close the connection."""
        self._packet_number = builder.packet_number
        self.close(error_code=QuicErrorCode.INTERNAL_ERROR,
                   reason_phrase="sending failed part-way through a transmit")

    def _write_stream_frame(self, builder: Any, space: Any, stream: Any,
                            max_offset: int) -> int:
        """Write one STREAM frame of ``stream`` into ``builder``'s packet, as far as flow
        control (``max_offset``) and the packet's room allow; the bytes newly sent."""
        sender = stream.sender
        next_offset = sender.next_offset
        overhead = (1 + LENGTH_BYTES + size_uint_var(stream.stream_id)
                    + (size_uint_var(next_offset) if next_offset else 0))
        previous_highest = sender.highest_offset
        room = builder.remaining_flight_space - overhead
        attach = (room >= ATTACH_MIN_BYTES and type(sender._buffer) is HeldBytes
                  and isinstance(builder, LeanPacketBuilder) and builder.can_attach(room))
        frame = (held_frame if attach else type(sender).get_frame)(sender, room, max_offset)
        if frame is None:
            return 0
        if attach and len(frame.data) < ATTACH_MIN_BYTES:
            attach, frame.data = False, bytes(frame.data)
        frame_type = QuicFrameType.STREAM_BASE | STREAM_FRAME_LENGTH_BIT
        if frame.offset:
            frame_type |= STREAM_FRAME_OFFSET_BIT
        if frame.fin:
            frame_type |= STREAM_FRAME_FIN_BIT
        end = frame.offset + len(frame.data)
        buf = builder.start_frame(frame_type, capacity=overhead,
                                  handler=sender.on_data_delivery,
                                  handler_args=(frame.offset, end, frame.fin))
        buf.push_uint_var(stream.stream_id)
        if frame.offset:
            buf.push_uint_var(frame.offset)
        buf.push_uint32(len(frame.data) | LENGTH_PREFIX)
        if attach:
            builder.attach(frame.data)
        else:
            buf.push_bytes(frame.data)
        if self._quic_logger is not None:
            builder.quic_logger_frames.append(
                self._quic_logger.encode_stream_frame(frame, stream_id=stream.stream_id))
        return sender.highest_offset - previous_highest


def held_frame(sender: Any, max_size: int, max_offset: int | None) -> QuicStreamFrame | None:
    """aioquic's ``QuicStreamSender.get_frame`` for a sender whose buffer is ``HeldBytes``,
    with the frame's data a view of that buffer instead of a copy where it lies in one of
    its buffers (same effects on the sender; the view is read before the packet ends,
    ``lurcher.core.quic_builder``)."""
    if max_size < 0:
        return None
    try:
        pending = sender._pending[0]
    except IndexError:
        if sender._pending_eof:
            sender._pending_eof = False
            return QuicStreamFrame(fin=True, offset=sender._buffer_fin)
        sender.buffer_is_empty = True
        return None
    start = pending.start
    stop = min(pending.stop, start + max_size)
    if max_offset is not None and stop > max_offset:
        stop = max_offset
    if stop <= start:
        return None
    base = sender._buffer_start
    frame = QuicStreamFrame(data=sender._buffer[start - base:stop - base], offset=start)
    sender._pending.subtract(start, stop)
    if stop > sender.highest_offset:
        sender.highest_offset = stop
    if sender._buffer_fin == stop:
        frame.fin = True
        sender._pending_eof = False
    return frame


def use_long_frames(quic: QuicConnection) -> None:
    """Make ``quic`` (an aioquic connection, client or server) write long STREAM frames,
    built around the stream's data (``lurcher.core.quic_builder``); its peer's ACK frames
    (``bound_ack_frames``) and the frames in each of its peer's packets (``bound_frames``)
    are bounded."""
    use_lean_builder()
    lean_recovery(quic)
    init_flow(quic)
    bound_ack_frames(quic)
    if type(quic) is QuicConnection:
        quic.__class__ = LongFrameQuicConnection
    if isinstance(quic, LongFrameQuicConnection):
        bound_frames(quic)


def bound_ack_frames(quic: QuicConnection) -> None:
    """Close the peer (PROTOCOL_VIOLATION) when one of its ACK frames declares more than
    ``MAX_ACK_FRAME_RANGES`` ranges, before aioquic parses them: aioquic inserts each range
    at the front of a list, so the cost grows with the square of their number (one 60 KB
    frame of 30,000 ranges held the event loop for about 180 ms). The handler table is
    aioquic's own, filled in its ``__init__``."""
    handlers = quic._QuicConnection__frame_handlers  # type: ignore[attr-defined]
    for frame_type in (QuicFrameType.ACK, QuicFrameType.ACK_ECN):
        handle, epochs = handlers[frame_type]
        handlers[frame_type] = (partial(_bounded_ack_frame, handle), epochs)


def bound_frames(quic: LongFrameQuicConnection) -> None:
    """Close the peer (PROTOCOL_VIOLATION) at the frame of one of its packets beyond
    ``MAX_FRAMES_PER_PACKET`` (padding aside): every other handler of aioquic's table counts down
    ``frames_left``, which ``_payload_received`` sets at each packet. (A payload that is one
    STREAM frame is handled without the table: ``lurcher.core.quic_receive``.)"""
    handlers = quic._QuicConnection__frame_handlers  # type: ignore[attr-defined]
    if getattr(handlers[QuicFrameType.PING][0], "func", None) is _counted_frame:
        return  # already counted (the connection was tuned twice)
    for frame_type, (handle, epochs) in handlers.items():
        if frame_type != QuicFrameType.PADDING:  # a run of padding is handled at once
            handlers[frame_type] = (partial(_counted_frame, quic, handle), epochs)


def _counted_frame(quic: LongFrameQuicConnection, handle: Callable, context: Any,
                   frame_type: int, buf: Buffer) -> None:
    quic.frames_left -= 1
    if quic.frames_left < 0:
        raise QuicConnectionError(error_code=QuicErrorCode.PROTOCOL_VIOLATION,
                                  frame_type=frame_type,
                                  reason_phrase="too many frames in one packet")
    handle(context, frame_type, buf)


def _bounded_ack_frame(handle: Callable, context: Any, frame_type: int, buf: Buffer) -> None:
    start = buf.tell()
    buf.pull_uint_var()  # largest acknowledged
    buf.pull_uint_var()  # ACK delay
    more_ranges = buf.pull_uint_var()
    if more_ranges >= MAX_ACK_FRAME_RANGES:
        raise QuicConnectionError(error_code=QuicErrorCode.PROTOCOL_VIOLATION,
                                  frame_type=frame_type,
                                  reason_phrase=f"an ACK frame of {more_ranges + 1} ranges "
                                                f"(at most {MAX_ACK_FRAME_RANGES})")
    buf.seek(start)
    handle(context, frame_type, buf)
