"""aioquic's datagram receive for the common case: one 1-RTT packet on a steady connection.

Owns: ``receive_steady``, used by ``LongFrameQuicConnection.receive_datagram``. For every
datagram aioquic parses a general header, searches the host's connection IDs and network
paths, and asks about version negotiation, retry, the first flight, 0-RTT keys, migration
and path validation. At 1,200-byte datagrams that is a sizeable share of a packet's cost.
A datagram from the active, validated path that holds one short-header packet to the
connection ID in use, on an established connection, takes none of those branches, so
``receive_steady`` decrypts it and does what aioquic then does, in aioquic's order: drop a
duplicate, check the reserved bits, raise the expected packet number, update the spin bit,
handle the frames, re-arm the idle timer, follow a switch of connection ID, and record the
packet for acknowledgement (a number right after the ACK queue's last range extends it in
place, ``add_packet_number``). A payload that starts with a STREAM frame (what the
receiving end of a transfer mostly gets) has that frame handled by aioquic's own STREAM
handler without the generic frame loop, and any frames after it by aioquic's
``_payload_received``; every other payload goes to ``_payload_received`` whole. That
handler reads the frame through a ``PayloadCursor``: aioquic's ``Buffer`` copies the whole
payload it is made from and ``pull_bytes`` copies the data out again, two copies of up to
64 KB per datagram; the cursor makes a ``Buffer`` of the frame's header bytes only and hands
the data out as a view of the decrypted payload when the data is most of it (so a view never
keeps more than twice its bytes alive), else as a copy.

The steps after decryption (``packet_received``, ``handle_payload``, ``record``) are also
those of the datagrams read together and received as a run (``lurcher.core.quic_receive_run``).

Invariants: every condition for one of aioquic's other branches is checked before anything
changes; if one holds, or decryption fails (which changes nothing), aioquic's
``receive_datagram`` handles the datagram unchanged. aioquic is pinned
(``lurcher.core.quic_frames.AIOQUIC_VERSION``) and tests/unit/test_quic_receive.py fails if
the method this mirrors changes.
"""

from __future__ import annotations

from typing import Any

from aioquic import tls
from aioquic.buffer import Buffer, BufferReadError
from aioquic.quic.connection import (END_STATES, MAX_ACK_RANGES, QuicConnectionError,
                                     QuicConnectionState, QuicReceiveContext)
from aioquic.quic.crypto import CryptoError, KeyUnavailableError
from aioquic.quic.packet import (PACKET_FIXED_BIT, PACKET_LONG_HEADER, PACKET_SPIN_BIT,
                                 QuicErrorCode, QuicFrameType)
from aioquic.quic.rangeset import RangeSet
from aioquic.quic.stream import StreamFinishedError

from lurcher.core.quic_builder import STREAM_FRAME_FIRST, STREAM_FRAME_LAST

ONE_RTT_RESERVED_BITS = 0x18
ONE_RTT, ZERO_RTT = tls.Epoch.ONE_RTT, tls.Epoch.ZERO_RTT
CONNECTED = QuicConnectionState.CONNECTED
STREAM_HEADER_MAX_BYTES = 24  # a STREAM frame's stream ID, offset and length: 8 bytes each at most


def _one_rtt(quic: Any) -> tuple:
    """The connection's 1-RTT packet space, 1-RTT keys and 0-RTT keys, looked up once per
    set of aioquic's dicts (which are keyed by an Enum whose hash is a Python call)."""
    spaces, cryptos = quic._spaces, quic._cryptos
    cached = quic.__dict__.get("_lurcher_one_rtt")
    if cached is None or cached[0] is not spaces or cached[1] is not cryptos:
        cached = (spaces, cryptos, spaces[ONE_RTT], cryptos[ONE_RTT], cryptos[ZERO_RTT])
        quic._lurcher_one_rtt = cached
    return cached


def is_short_header(data: Any) -> bool:
    """``data`` starts with a short (1-RTT) header: long-header bit 0, fixed bit 1."""
    return bool(data) and data[0] & (PACKET_LONG_HEADER | PACKET_FIXED_BIT) == PACKET_FIXED_BIT


def _active_path(quic: Any, data: bytes, addr: Any) -> Any:
    """The connection's active network path when ``data`` from ``addr`` qualifies for the
    steady receive (module docstring), else None."""
    if (quic._state is not CONNECTED or quic._quic_logger is not None
            or not is_short_header(data)
            or quic._peer_cid.sequence_number is None or quic._close_at is None):
        return None
    paths = quic._network_paths
    path = paths[0] if paths else None
    if path is None or path.addr != addr or not path.is_validated:
        return None
    host_cid = quic.host_cid
    if (len(host_cid) != quic._configuration.connection_id_length
            or data[1:1 + len(host_cid)] != host_cid):
        return None
    return path


def receive_steady(quic: Any, data: bytes, addr: Any, now: float) -> bool:
    """Handle ``data`` as aioquic's ``receive_datagram`` would, if it is one 1-RTT packet
    of a steady connection; False (nothing changed) otherwise."""
    path = _active_path(quic, data, addr)
    if path is None or not steady_keys(quic):
        return False
    _, _, space, crypto, _ = _one_rtt(quic)
    try:
        plain_header, payload, packet_number = crypto.decrypt_packet(
            data, 1 + len(quic.host_cid), space.expected_packet_number)
    except (CryptoError, KeyUnavailableError):
        return False
    if packet_number in space.received_packets:
        return True  # a duplicate (RFC 9000 §12.3)
    if not packet_received(quic, space, plain_header, packet_number):
        return True
    handle_payload(quic, path, space, payload, packet_number, now)
    return True


def steady_keys(quic: Any) -> bool:
    """Whether a server's 0-RTT keys are gone (aioquic's receive has a branch for them)."""
    return quic._is_client or not _one_rtt(quic)[4].recv.is_valid()


def packet_received(quic: Any, space: Any, plain_header: bytes, packet_number: int) -> bool:
    """A decrypted packet's header checked (reserved bits: False, the connection closed)
    and its number noted (expected next number, spin bit)."""
    if plain_header[0] & ONE_RTT_RESERVED_BITS:
        quic.close(error_code=QuicErrorCode.PROTOCOL_VIOLATION,
                   frame_type=QuicFrameType.PADDING,
                   reason_phrase="Reserved bits must be zero")
        return False
    if packet_number > space.expected_packet_number:
        space.expected_packet_number = packet_number + 1
    if packet_number > quic._spin_highest_pn:
        spin_bit = bool(plain_header[0] & PACKET_SPIN_BIT)
        quic._spin_bit = not spin_bit if quic._is_client else spin_bit
        quic._spin_highest_pn = packet_number
    return True


def handle_payload(quic: Any, path: Any, space: Any, payload: bytes, packet_number: int,
                   now: float) -> None:
    """A checked packet's frames handled, the idle timer re-armed and the packet recorded
    for acknowledgement, in aioquic's order."""
    host_cid = quic.host_cid
    context = QuicReceiveContext(epoch=ONE_RTT, host_cid=host_cid, network_path=path,
                                 quic_logger_frames=None, time=now, version=None)
    try:
        is_ack_eliciting, is_probing = _frames_received(quic, context, payload)
    except QuicConnectionError as exc:
        quic._logger.warning(exc)
        quic.close(error_code=exc.error_code, frame_type=exc.frame_type,
                   reason_phrase=exc.reason_phrase)
    if quic._state in END_STATES or quic._close_pending:
        return
    quic._close_at = now + quic._idle_timeout()
    quic._ack_eliciting_sent_since_receipt = False
    if not quic._is_client and not is_probing and context.host_cid != quic.host_cid:
        _switch_host_cid(quic, context.host_cid, path)
    record(quic, space, packet_number, is_ack_eliciting, now)


def _frames_received(quic: Any, context: Any, payload: bytes) -> tuple[bool, bool]:
    """aioquic's ``_payload_received`` for a 1-RTT payload: whether it is ACK-eliciting and
    whether it is probing only. A leading STREAM frame goes straight to aioquic's STREAM
    handler (with the loop's error mapping); the frames after it, if any, to
    ``_payload_received``. A STREAM frame makes the packet ACK-eliciting and not probing."""
    frame_type = payload[0] if payload else -1
    if not STREAM_FRAME_FIRST <= frame_type <= STREAM_FRAME_LAST:
        return quic._payload_received(context, payload)
    buf = PayloadCursor(payload, 1)
    try:
        quic._handle_stream_frame(context, frame_type, buf)
    except BufferReadError:
        raise QuicConnectionError(error_code=QuicErrorCode.FRAME_ENCODING_ERROR,
                                  frame_type=frame_type,
                                  reason_phrase="Failed to parse frame") from None
    except StreamFinishedError:
        pass  # no state left for the stream: the frame is ignored, as aioquic does
    if not buf.eof():
        quic._payload_received(context, payload[buf.tell():])
    return True, False


class PayloadCursor:
    """A read cursor over a decrypted payload, standing in for aioquic's ``Buffer`` in its
    STREAM handler (module docstring): the frame's varints are read by a ``Buffer`` of its
    first ``STREAM_HEADER_MAX_BYTES``; ``pull_bytes`` reads to anywhere in the payload."""

    __slots__ = ("payload", "head", "end", "capacity")

    def __init__(self, payload: bytes, start: int) -> None:
        self.payload = payload
        self.capacity = len(payload)
        self.head = Buffer(data=payload[:start + STREAM_HEADER_MAX_BYTES])
        self.head.seek(start)
        self.end = -1  # where pull_bytes left the cursor, once called

    def pull_uint_var(self) -> int:
        return self.head.pull_uint_var()

    def tell(self) -> int:
        return self.end if self.end >= 0 else self.head.tell()

    def eof(self) -> bool:
        return self.tell() >= self.capacity

    def pull_bytes(self, length: int) -> bytes | memoryview:
        """The next ``length`` bytes: a view of the payload when they are at least half of
        it, else a copy. Raises BufferReadError past the payload's end, as ``Buffer`` does."""
        start = self.tell()
        end = start + length
        if end > self.capacity:
            raise BufferReadError("Read out of bounds")
        self.end = end
        if 2 * length >= self.capacity:
            return memoryview(self.payload)[start:end]
        return self.payload[start:end]


def _switch_host_cid(quic: Any, host_cid: bytes, path: Any) -> None:
    """The peer moved to another of our connection IDs (aioquic's migration step)."""
    quic.host_cid = host_cid
    if path.peer_cid is None:
        quic.change_connection_id()


def add_packet_number(ranges: RangeSet, packet_number: int) -> None:
    """``ranges.add(packet_number)``, with the usual case (the number right after the last
    range: packets arriving in order) done without aioquic's walk over every range. The
    ranges that result are the same."""
    held = ranges._RangeSet__ranges
    if held and held[-1].stop == packet_number:
        held[-1] = range(held[-1].start, packet_number + 1)
    else:
        ranges.add(packet_number)


def record(quic: Any, space: Any, packet_number: int, is_ack_eliciting: bool,
           now: float) -> None:
    """Note the packet as received and, when it asks for one, schedule an ACK."""
    if space.discarded:
        return
    if packet_number > space.largest_received_packet:
        space.largest_received_packet = packet_number
        space.largest_received_time = now
    add_packet_number(space.ack_queue, packet_number)
    space.received_packets.add(packet_number)
    if len(space.ack_queue) > MAX_ACK_RANGES:
        space.ack_queue.shift()
    if is_ack_eliciting and space.ack_at is None:
        space.ack_at = now + quic._ack_delay

