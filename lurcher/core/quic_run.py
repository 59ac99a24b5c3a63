"""Runs of full 1-RTT packets of one stream's data, built in one loop (``write_run``).

Owns: ``write_run``, called by ``lurcher.core.quic_steady.write_steady`` before each packet
after the first of a build. A steady connection sending one large reply or request (one
stream in the queue, no ACK and no limit frame due, no pacing, no key update asked) builds
packet after packet that each hold only a STREAM frame of that stream, filled to the
datagram's room. Built through aioquic's builder, each such packet costs a dozen Python
calls (start the packet, scan the queue, size and start the frame, take a frame from the
sender and subtract it from the sender's pending ranges, push the header fields, end the
packet) on top of its encryption; at 1,200-byte datagrams that is most of a packet's cost.
``write_run`` builds the same packets directly: the short header and the frame header from
bytes prepared once per run, the data a view of the send buffer, one encryption (of the
frame header and the data as two parts, ``encrypt_parts``, into the datagram, where datagrams are
large enough for the builder to attach data, ``ATTACH_MIN_BYTES``), and the
builder's own bookkeeping of an ended packet (``LeanPacketBuilder._finish_datagram``,
which also hands datagrams out early). The sender's pending range is subtracted once for
the whole run, up to the end of the last packet finished (also when a later one fails, so
the sender's pending data, highest offset and flow-control count stay consistent).

Invariants: every packet of a run is byte for byte what the steady loop builds in its place
(the same packet number, header, frame, offsets and delivery handler; tests/unit/
test_quic_run.py decrypts both and compares); a run only builds packets that are full and
leave data after them, so a frame with FIN, a short last frame, a frame cut by flow control
or by the congestion window, and everything else are left to the steady loop; a run leaves
the builder as after a packet that filled its own datagram.
"""

from __future__ import annotations

from typing import Any

from aioquic.buffer import encode_uint_var
from aioquic.quic.packet import PACKET_FIXED_BIT, QuicFrameType
from aioquic.quic.packet_builder import PACKET_NUMBER_SEND_SIZE, QuicSentPacket

from lurcher.core.quic_builder import (ATTACH_MIN_BYTES, ONE_RTT, ONE_RTT_EPOCH, SHORT_HEADER_BYTES,
                                       LeanPacketBuilder)

LENGTH_BYTES = 4
LENGTH_PREFIX = 0x80000000  # varint prefix 0b10: a 4-byte length
STREAM_FRAME_FIN_BIT, STREAM_FRAME_LENGTH_BIT, STREAM_FRAME_OFFSET_BIT = 0x01, 0x02, 0x04
STREAM_WITH_LENGTH = QuicFrameType.STREAM_BASE | STREAM_FRAME_LENGTH_BIT
RUN_MIN_ROOM = 256  # a datagram with less room for data than this goes to the steady loop


def can_run(quic: Any, builder: Any, crypto: Any, pacer: Any) -> bool:
    """Whether runs may be built in this build at all (checked once per build)."""
    return (type(builder) is LeanPacketBuilder and builder.max_total_bytes is None
            and pacer.packet_time is None and quic._quic_logger is None
            and not crypto._update_key_requested)


def _run_stream(quic: Any) -> Any:
    """The one stream of the queue when it has data to send and nothing else pending."""
    queue = quic._streams_queue
    if len(queue) != 1:
        return None
    stream = queue[0]
    if (stream.is_finished or stream.is_blocked or stream.receiver.stop_pending
            or stream.sender.reset_pending or stream.sender.buffer_is_empty
            or not len(stream.sender._pending)):
        return None
    return stream


def write_run(quic: Any, builder: LeanPacketBuilder, crypto: Any) -> None:
    """Build as many full STREAM packets of the queue's one stream as fit (module docstring);
    none when the queue, the builder or the stream's data do not allow one."""
    stream = _run_stream(quic)
    if stream is None:
        return
    if builder._packet is not None:
        builder._end_packet()
    if not builder._datagram_init or builder._buffer.tell():
        return  # the last packet shares its datagram: the steady loop goes on with it
    sender = stream.sender
    pending = sender._pending
    first = pending[0].start
    built = [first]  # the offset the finished packets reach, even if a later one fails
    try:
        _full_packets(quic, builder, crypto, stream, built, pending[0].stop)
    finally:
        if built[0] > first:
            pending.subtract(first, built[0])


def _full_packets(quic: Any, builder: LeanPacketBuilder, crypto: Any, stream: Any,
                  built: list[int], limit: int) -> None:
    """Full packets of ``stream``'s data from offset ``built[0]``, none reaching ``limit``;
    ``built[0]`` follows the end of each finished packet."""
    start = built[0]
    sender = stream.sender
    send, buffer, base = crypto.send, sender._buffer, sender._buffer_start
    on_delivery = sender.on_data_delivery
    first_byte = (PACKET_FIXED_BIT | (builder._spin_bit << 5) | (crypto.key_phase << 2)
                  | (PACKET_NUMBER_SEND_SIZE - 1))
    header_start = bytes((first_byte,)) + builder._peer_cid
    stream_id = encode_uint_var(stream.stream_id)
    fixed = (SHORT_HEADER_BYTES + len(builder._peer_cid) + crypto.aead_tag_size
             + 1 + len(stream_id) + LENGTH_BYTES)
    by_parts = (builder._buffer_capacity >= ATTACH_MIN_BYTES
                and getattr(send, "can_encrypt_parts", bool)())
    while True:
        builder._init_datagram()
        offset = encode_uint_var(start) if start else b""
        room = builder._flight_capacity - fixed - len(offset)
        stop = start + room
        max_offset = min(sender.highest_offset + quic._remote_max_data
                         - quic._remote_max_data_used, stream.max_stream_data_remote)
        if room < RUN_MIN_ROOM or stop >= limit or stop > max_offset:
            return
        frame_type = STREAM_WITH_LENGTH | STREAM_FRAME_OFFSET_BIT if start else STREAM_WITH_LENGTH
        frame_header = (bytes((frame_type,)) + stream_id + offset
                        + (room | LENGTH_PREFIX).to_bytes(LENGTH_BYTES, "big"))
        data = buffer[start - base:stop - base]
        number = builder._packet_number
        packet = builder._packet = QuicSentPacket(
            epoch=ONE_RTT_EPOCH, in_flight=True, is_ack_eliciting=True,
            is_crypto_packet=False, packet_number=number, packet_type=ONE_RTT)
        packet.delivery_handlers.append((on_delivery, (start, stop, False)))
        header = header_start + (number & 0xFFFF).to_bytes(2, "big")
        builder._finish_datagram(
            send.encrypt_parts(header, [frame_header, data], number) if by_parts
            else send.encrypt_packet(header, frame_header + data, number))
        if stop > sender.highest_offset:
            quic._remote_max_data_used += stop - sender.highest_offset
            sender.highest_offset = stop
        start = built[0] = stop
