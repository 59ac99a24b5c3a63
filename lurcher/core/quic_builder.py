"""1-RTT packets built around a stream's data instead of copying it (``LeanPacketBuilder``).

Owns: aioquic's packet builder as every aioquic connection of the process uses it
(``use_lean_builder`` puts the class where aioquic's connection module looks it up). aioquic
copies a STREAM frame's data into its packet buffer, copies the packet out again to encrypt
it, slices the payload (a copy), joins the header to the ciphertext (a copy), writes that
back into the buffer (a copy) and copies the datagram out of the buffer (a copy): six copies
of every byte sent, besides the encryption. Here a large STREAM frame's data is *attached*
(``attach``): the buffer only keeps its place, and when the packet ends the frame's header
and data (from the stream's send buffer) are gathered once and AES-GCM writes the datagram
(``LeanCryptoContext.encrypt_parts``). The bytes on the wire are the same.

A packet takes the lean path only when it is a 1-RTT packet alone in its datagram (the
steady state after the handshake), its keys are AES-GCM and no key update is pending
(``can_attach``); any other case, or a packet that needs padding, writes the attached data
into the buffer and ends the packet as aioquic does.

Every 1-RTT packet also starts with only the steps that case needs (``start_packet``), a
STREAM frame starts with only its room check (``start_frame``), and a 1-RTT packet alone in
its datagram that needs no padding, with nothing attached, is encrypted from the buffer
straight into its datagram (``_end_plain``): aioquic copies it out of the buffer, slices it,
and copies the result back in and out again. This is what 1,200-byte datagrams cost per
packet; tests/unit/test_quic_builder.py compares the bytes with aioquic's builder and fails
if the builder methods these mirror change.

A steady connection's builder also hands finished datagrams out while it builds the rest
(``send_early``): every time the datagrams it ended itself since the last hand-out reach the
given size, all finished datagrams not handed out yet go to the connection's sender, so the
peer works on the first datagrams while later ones are built, in one build instead of one
per chunk. ``flush`` still returns every datagram, those handed out first, and aioquic
registers the packets then: nothing can be received in between. A build that fails after a
hand-out closes the connection without reusing the sent packet numbers
(``LongFrameQuicConnection._write_application``).

Invariants: at most one attachment per packet; the attached data is not changed before the
packet ends (it is a view of a ``HeldBytes`` send buffer, which nothing changes,
``lurcher.core.quic_send``); aioquic is pinned (``lurcher.core.quic_frames.AIOQUIC_VERSION``).
"""

from __future__ import annotations

from typing import Any, Callable

import aioquic.quic.connection as aioquic_connection
from aioquic.quic.packet import PACKET_FIXED_BIT, QuicFrameType, QuicPacketType
from aioquic.quic.packet_builder import (PACKET_NUMBER_MAX_SIZE, PACKET_NUMBER_SEND_SIZE,
                                         QuicPacketBuilder, QuicPacketBuilderStop,
                                         QuicSentPacket)
from aioquic.tls import Epoch

ATTACH_MIN_BYTES = 4096  # below this, copying costs less than a separate encryption setup
ONE_RTT, ONE_RTT_EPOCH = QuicPacketType.ONE_RTT, Epoch.ONE_RTT
SHORT_HEADER_BYTES = 1 + PACKET_NUMBER_SEND_SIZE  # first byte, packet number; + peer's CID
MIN_PAYLOAD_BYTES = PACKET_NUMBER_MAX_SIZE - PACKET_NUMBER_SEND_SIZE  # header sample room
# a STREAM frame's type as a one-byte varint: 0x08 to 0x0f (the low bits: OFF, LEN, FIN)
STREAM_FRAME_FIRST, STREAM_FRAME_LAST = QuicFrameType.STREAM_BASE, QuicFrameType.STREAM_BASE | 7


class LeanPacketBuilder(QuicPacketBuilder):
    """aioquic's packet builder with attached STREAM data (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._attached: tuple[int, Any] | None = None
        self._early_send: Callable[[list[bytearray]], None] | None = None
        self._early_bytes = 0
        self._early_handed = 0  # datagrams handed out so far
        self._early_unsent = 0  # bytes of finished datagrams not handed out yet

    def send_early(self, send: Callable[[list[bytearray]], None], every_bytes: int) -> None:
        """From now on, hand finished datagrams to ``send`` whenever those not handed out
        yet reach ``every_bytes``."""
        self._early_send, self._early_bytes = send, every_bytes

    def can_attach(self, size: int) -> bool:
        """Whether ``size`` bytes of stream data can be attached to the current packet."""
        crypto = self._packet_crypto
        return (size >= ATTACH_MIN_BYTES and self._attached is None
                and self._packet_type == QuicPacketType.ONE_RTT and self._packet_start == 0
                and not crypto._update_key_requested
                and getattr(crypto.send, "can_encrypt_parts", bool)())

    def attach(self, data: Any) -> None:
        """Let ``data`` stand at the buffer's position, which moves past it uncopied."""
        buf = self._buffer
        start = buf.tell()
        self._attached = (start, data)
        buf.seek(start + len(data))

    def start_packet(self, packet_type: QuicPacketType, crypto: Any) -> None:
        """aioquic's; a 1-RTT packet's start takes only the steps that case needs."""
        if packet_type is not ONE_RTT:
            super().start_packet(packet_type, crypto)
            return
        if self._packet is not None:
            self._end_packet()
        packet_start = self._buffer.tell()
        if self._buffer_capacity - packet_start < 128 or (
                self._datagram_needs_padding and self._flight_capacity < self._buffer_capacity):
            self._flush_current_datagram()  # too little room, or padding the window can't take
            packet_start = 0
        if self._datagram_init:
            self._init_datagram()
        header_size = SHORT_HEADER_BYTES + len(self._peer_cid)
        if packet_start + header_size >= self._buffer_capacity:
            raise QuicPacketBuilderStop
        self._header_size = header_size
        self._packet = packet = QuicSentPacket(
            epoch=ONE_RTT_EPOCH, in_flight=False, is_ack_eliciting=False,
            is_crypto_packet=False, packet_number=self._packet_number, packet_type=ONE_RTT)
        self._packet_crypto = crypto
        self._packet_start = packet_start
        self._packet_type = ONE_RTT
        self.quic_logger_frames = packet.quic_logger_frames
        self._buffer.seek(packet_start + header_size)

    def start_frame(self, frame_type: int, capacity: int = 1, handler: Any = None,
                    handler_args: Any = ()) -> Any:
        """aioquic's; a STREAM frame (ack-eliciting, in flight, neither CRYPTO nor a path
        frame, so none of aioquic's per-type steps apply) takes only the room check."""
        if not STREAM_FRAME_FIRST <= frame_type <= STREAM_FRAME_LAST:
            return super().start_frame(frame_type, capacity, handler, handler_args)
        buf = self._buffer
        used = buf.tell()
        if used - self._packet_start <= self._header_size:  # the packet's first frame
            capacity = max(capacity, MIN_PAYLOAD_BYTES)
        room = min(self._buffer_capacity, self._flight_capacity) - used \
            - self._packet_crypto.aead_tag_size
        if room < capacity:
            raise QuicPacketBuilderStop
        buf.push_uint_var(frame_type)
        packet = self._packet
        packet.is_ack_eliciting = packet.in_flight = True
        if handler is not None:
            packet.delivery_handlers.append((handler, handler_args))
        return buf

    def _init_datagram(self) -> None:
        """aioquic's set-up of a new datagram's byte and flight capacities."""
        if self.max_total_bytes is not None:
            remaining_total_bytes = self.max_total_bytes - self._total_bytes
            if remaining_total_bytes < self._buffer_capacity:
                self._buffer_capacity = remaining_total_bytes
        self._flight_capacity = self._buffer_capacity
        if self.max_flight_bytes is not None:
            remaining_flight_bytes = self.max_flight_bytes - self._flight_bytes
            if remaining_flight_bytes < self._flight_capacity:
                self._flight_capacity = remaining_flight_bytes
        self._datagram_flight_bytes = 0
        self._datagram_init = False
        self._datagram_needs_padding = False

    def _end_packet(self) -> None:
        attached, self._attached = self._attached, None
        if attached is None:
            if not self._end_plain():
                super()._end_packet()
        elif self._datagram_needs_padding or not self._end_attached(*attached):
            self._write_attached(*attached)
            super()._end_packet()

    def _end_plain(self) -> bool:
        """End a 1-RTT packet alone in its datagram that needs no padding as aioquic does,
        encrypting its payload straight into the datagram; False (nothing done) otherwise."""
        buf = self._buffer
        packet_size = buf.tell()
        header_size = self._header_size
        if (self._packet_type is not ONE_RTT or self._packet_start or self._datagram_needs_padding
                or packet_size - header_size < MIN_PAYLOAD_BYTES):
            return False
        crypto = self._write_short_header()
        self._finish_datagram(crypto.encrypt_packet(buf.data_slice(0, header_size),
                                                    buf.data_slice(header_size, packet_size),
                                                    self._packet_number))
        return True

    def _write_short_header(self) -> Any:
        """Write the packet's short header at the buffer's start; the packet's keys."""
        buf = self._buffer
        crypto = self._packet_crypto
        buf.seek(0)
        buf.push_uint8(PACKET_FIXED_BIT | (self._spin_bit << 5) | (crypto.key_phase << 2)
                       | (PACKET_NUMBER_SEND_SIZE - 1))
        buf.push_bytes(self._peer_cid)
        buf.push_uint16(self._packet_number & 0xFFFF)
        return crypto

    def _write_attached(self, start: int, data: Any) -> None:
        buf = self._buffer
        end = buf.tell()
        buf.seek(start)
        buf.push_bytes(bytes(data))
        buf.seek(end)

    def _end_attached(self, start: int, data: Any) -> bool:
        """End the packet as aioquic does, with the attached data encrypted in place of the
        buffer's copy of it; False (nothing done) when the keys cannot do it."""
        buf = self._buffer
        packet_size = buf.tell()
        header_size = self._header_size
        crypto = self._write_short_header()
        end = start + len(data)
        parts = [buf.data_slice(header_size, start), data]
        if packet_size > end:
            parts.append(buf.data_slice(end, packet_size))
        datagram = crypto.send.encrypt_parts(buf.data_slice(0, header_size), parts,
                                             self._packet_number)
        if datagram is None:
            buf.seek(packet_size)
            return False
        self._finish_datagram(datagram)
        return True

    def _finish_datagram(self, datagram: bytearray) -> None:
        """aioquic's bookkeeping of an ended packet that fills its own datagram."""
        packet = self._packet
        packet.sent_bytes = len(datagram)
        self._packets.append(packet)
        if packet.in_flight:
            self._datagram_flight_bytes += packet.sent_bytes
        self._datagrams.append(datagram)
        self._flight_bytes += self._datagram_flight_bytes
        self._total_bytes += len(datagram)
        self._datagram_init = True
        self._buffer.seek(0)
        self._packet_number += 1
        self._packet = None
        self.quic_logger_frames = None
        if self._early_send is not None:
            self._early_unsent += len(datagram)
            if self._early_unsent >= self._early_bytes:
                self._hand_early()

    def _hand_early(self) -> None:
        """Hand the finished datagrams not handed out yet to the early sender."""
        datagrams = self._datagrams
        handed, self._early_handed, self._early_unsent = self._early_handed, len(datagrams), 0
        self._early_send(datagrams[handed:])

    @property
    def handed_early(self) -> bool:
        """Whether any datagram of this build was handed out before it ended."""
        return self._early_handed > 0


def use_lean_builder() -> None:
    """Make aioquic's connections build their packets with ``LeanPacketBuilder``."""
    aioquic_connection.QuicPacketBuilder = LeanPacketBuilder
