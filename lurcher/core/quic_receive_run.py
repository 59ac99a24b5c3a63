"""Datagrams read together, received as one run: in-order STREAM data handed up once.

Owns: ``receive_datagrams``, used by ``LongFrameQuicConnection.receive_datagrams`` for the
datagrams one read returned (``lurcher.core.udp_offload``). The receiving end of a transfer
mostly gets datagrams that each hold one 1-RTT packet with one STREAM frame, the next bytes
of one stream. ``receive_steady`` handles each through aioquic's STREAM handler, which
hands every packet's data up as its own ``StreamDataReceived`` event, and re-arms the idle
timer per packet. Here such packets are decrypted and checked one by one as
``receive_steady`` checks them (connection ID, duplicates, reserved bits, expected packet
number, spin bit, recorded for acknowledgement), but their data is held while the next
packet continues it and handed to the stream once, as one frame's worth: the stream's
receive state, the connection's flow-control count and one event, as aioquic's in-order
path leaves them. The idle timer is re-armed once, after the run, with the same ``now``.

A packet takes that path only when its one STREAM frame (no FIN, nothing after it) is for an
existing bidirectional stream, continues exactly where the stream's received data (or the
held data) ends, with nothing buffered out of order, and stays within the stream's and the
connection's flow-control limits. Any other packet first hands up the held data, then is
handled whole by ``receive_steady``'s own steps (already decrypted, so never twice), or,
when it is not a steady 1-RTT packet at all, by aioquic's ``receive_datagram``; the run's
checks are made again after it. No run opens while a close is pending (aioquic then
delivers a packet's frames but neither records it nor re-arms the timer).

Invariants: the data a stream delivers, its order, the events' order relative to every
other frame, the acknowledgements and the flow-control accounting are those of handling the
datagrams one at a time; only the number of data events differs.
"""

from __future__ import annotations

from typing import Any

from aioquic.quic.connection import stream_is_unidirectional
from aioquic.quic.crypto import CryptoError, KeyUnavailableError
from aioquic.quic.events import StreamDataReceived

from lurcher.core.quic_builder import STREAM_FRAME_FIRST, STREAM_FRAME_LAST
from lurcher.core.quic_receive import (_active_path, _one_rtt, handle_payload, is_short_header,
                                       packet_received, record, steady_keys)
from lurcher.core.quic_run import (STREAM_FRAME_FIN_BIT, STREAM_FRAME_LENGTH_BIT,
                                   STREAM_FRAME_OFFSET_BIT)


def receive_datagrams(quic: Any, datagrams: list[Any], addr: Any, now: float) -> None:
    """Each of ``datagrams`` from ``addr`` received, in order (module docstring)."""
    run: SteadyRun | None = None
    for data in datagrams:
        if run is None:
            run = SteadyRun.open(quic, data, addr, now)
        if run is not None and run.take(data):
            if run.stale:
                run.end()
                run = None
            continue
        if run is not None:
            run.end()
            run = None
        quic.receive_datagram(data, addr, now)
    if run is not None:
        run.end()


def _uint_var(data: Any, at: int) -> tuple[int, int]:
    """The QUIC variable-length integer at ``at`` and the position after it."""
    first = data[at]
    size = 1 << (first >> 6)
    value = first & 0x3F
    for i in range(at + 1, at + size):
        value = (value << 8) | data[i]
    return value, at + size


def _lone_stream_frame(payload: Any) -> tuple[int, int, int, int] | None:
    """Stream ID, offset, data position and length of the STREAM frame without FIN that
    ``payload`` holds alone, with data; None for any other payload (a truncated one too)."""
    frame_type = payload[0] if payload else -1
    if not STREAM_FRAME_FIRST <= frame_type <= STREAM_FRAME_LAST:
        return None
    if frame_type & STREAM_FRAME_FIN_BIT:
        return None
    try:
        stream_id, at = _uint_var(payload, 1)
        offset, at = _uint_var(payload, at) if frame_type & STREAM_FRAME_OFFSET_BIT else (0, at)
        length, at = (_uint_var(payload, at) if frame_type & STREAM_FRAME_LENGTH_BIT
                      else (len(payload) - at, at))
    except IndexError:
        return None
    if at + length != len(payload) or stream_is_unidirectional(stream_id) or not length:
        return None
    return stream_id, offset, at, length


class SteadyRun:
    """Packets of one steady connection received in a row, and the in-order STREAM data
    they carry that is not handed up yet."""

    __slots__ = ("quic", "path", "space", "crypto", "host_cid", "now", "stale", "taken",
                 "stream", "start", "end_offset", "views")

    def __init__(self, quic: Any, path: Any, now: float) -> None:
        self.quic, self.path, self.now = quic, path, now
        _, _, self.space, self.crypto, _ = _one_rtt(quic)
        self.host_cid = quic.host_cid
        self.stale = False  # a packet was handled whole: the run's checks must be made again
        self.taken = False  # a STREAM packet was taken: the idle timer is due at the end
        self.stream: Any = None
        self.start = self.end_offset = 0
        self.views: list[Any] = []

    @classmethod
    def open(cls, quic: Any, data: Any, addr: Any, now: float) -> SteadyRun | None:
        """A run, when ``data`` qualifies for ``receive_steady``; else None."""
        path = _active_path(quic, data, addr)
        if path is None or quic._close_pending or not steady_keys(quic):
            return None  # (a close pending: aioquic records no packet, ``handle_payload``)
        return cls(quic, path, now)

    def take(self, data: Any) -> bool:
        """Receive ``data`` in the run; False (nothing changed) when it is not a 1-RTT
        packet to the run's connection ID that decrypts."""
        cid = self.host_cid
        if not is_short_header(data) or data[1:1 + len(cid)] != cid:
            return False
        space = self.space
        try:
            plain_header, payload, number = self.crypto.decrypt_packet(
                data, 1 + len(cid), space.expected_packet_number)
        except (CryptoError, KeyUnavailableError):
            return False
        if number in space.received_packets:
            return True  # a duplicate (RFC 9000 §12.3)
        if not packet_received(self.quic, space, plain_header, number):
            self.settle()
            self.stale = True
            return True
        if self._hold(payload):
            self.taken = True
            record(self.quic, space, number, True, self.now)
        else:
            self.settle()
            handle_payload(self.quic, self.path, space, payload, number, self.now)
            self.stale = True
        return True

    def _hold(self, payload: Any) -> bool:
        """Hold the data of ``payload`` when it is one in-order STREAM frame (module
        docstring); False (nothing changed) otherwise."""
        frame = _lone_stream_frame(payload)
        if frame is None:
            return False
        stream_id, offset, at, length = frame
        if self.stream is not None and (self.stream.stream_id != stream_id
                                        or offset != self.end_offset):
            self.hand_up()
        if self.stream is None and not self._begin(stream_id, offset):
            return False
        end = offset + length
        quic = self.quic
        if (end > self.stream.max_stream_data_local
                or quic._local_max_data.used + end - self.start > quic._local_max_data.value):
            return False
        self.views.append(memoryview(payload)[at:])
        self.end_offset = end
        return True

    def _begin(self, stream_id: int, offset: int) -> bool:
        """Start holding data of stream ``stream_id`` at ``offset``, if it is in order."""
        stream = self.quic._streams.get(stream_id)
        if stream is None:
            return False
        receiver = stream.receiver
        if (receiver.is_finished or receiver._final_size is not None or receiver._buffer
                or receiver._buffer_start != offset or receiver.highest_offset != offset):
            return False
        self.stream, self.start, self.end_offset = stream, offset, offset
        return True

    def hand_up(self) -> None:
        """Hand the held data to its stream as aioquic's in-order path does."""
        stream, views = self.stream, self.views
        self.stream = None
        if not views:
            return
        count = self.end_offset - self.start
        receiver = stream.receiver
        receiver._buffer_start += count
        receiver.highest_offset = self.end_offset
        self.quic._local_max_data.used += count
        data = views[0] if len(views) == 1 else b"".join(views)
        self.quic._events.append(StreamDataReceived(data=data, end_stream=False,
                                                    stream_id=stream.stream_id))
        self.views = []

    def settle(self) -> None:
        """Hand up what is held and re-arm the idle timer as the packets taken so far did
        (the same ``now``; STREAM frames change nothing the timeout depends on)."""
        self.hand_up()
        if self.taken:
            self.taken = False
            quic = self.quic
            quic._close_at = self.now + quic._idle_timeout()
            quic._ack_eliciting_sent_since_receipt = False

    end = settle
