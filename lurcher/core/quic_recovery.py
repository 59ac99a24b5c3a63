"""aioquic's ACK processing with a stream's consecutive deliveries told at once
(``LeanPacketRecovery``).

Owns: the one override of aioquic's ``QuicPacketRecovery``, ``on_ack_received``. An ACK
frame that acknowledges a run of packets (at 1,200-byte datagrams, hundreds per frame) makes
aioquic call the stream sender's ``on_data_delivery`` once per packet, and each call adds a
range to the sender's acknowledged set and trims its buffer. Here the ACKED deliveries of
one sender whose byte ranges follow each other in packet order are told in one call over
the joined range (its FIN flag from the last), which leaves the sender as the separate calls
do: the same acknowledged bytes, the same buffer start, the same finished state. Every
other delivery handler (ACK, flow-control and stop/reset frames) is called as aioquic calls
it, in packet order: a pending joined delivery is told first. Everything else (which packets
are acknowledged, the congestion controller per packet, the RTT estimate, loss detection)
is aioquic's, in aioquic's order.

Invariants: aioquic is pinned (``lurcher.core.quic_frames.AIOQUIC_VERSION``) and
tests/unit/test_quic_recovery.py fails if the method this mirrors changes; a connection's
recovery becomes lean by ``lean_recovery`` (aioquic creates the object itself).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from aioquic.quic.packet_builder import QuicDeliveryState
from aioquic.quic.recovery import QuicPacketRecovery
from aioquic.quic.stream import QuicStreamSender

ACKED = QuicDeliveryState.ACKED
STREAM_DELIVERY = QuicStreamSender.on_data_delivery


class _Deliveries:
    """The delivery handlers of acknowledged packets, called in order, with a sender's
    consecutive stream ranges joined (module docstring)."""

    __slots__ = ("sender", "start", "stop", "fin")

    def __init__(self) -> None:
        self.sender: Any = None
        self.start = self.stop = 0
        self.fin = False

    def add(self, handler: Any, args: tuple) -> None:
        if getattr(handler, "__func__", None) is STREAM_DELIVERY:
            sender = handler.__self__
            start, stop, fin = args
            if sender is self.sender and start == self.stop and not self.fin:
                self.stop, self.fin = stop, fin
                return
            self.flush()
            self.sender, self.start, self.stop, self.fin = sender, start, stop, fin
            return
        self.flush()
        handler(ACKED, *args)

    def flush(self) -> None:
        sender = self.sender
        if sender is not None:
            self.sender = None
            sender.on_data_delivery(ACKED, self.start, self.stop, self.fin)


class LeanPacketRecovery(QuicPacketRecovery):
    """aioquic's packet recovery with joined stream deliveries (module docstring)."""

    def on_ack_received(self, *, ack_rangeset: Any, ack_delay: float, now: float,
                        space: Any) -> None:
        """aioquic's, with the delivery handlers called through ``_Deliveries``."""
        largest_acked = ack_rangeset.bounds().stop - 1
        if largest_acked > space.largest_acked_packet:
            space.largest_acked_packet = largest_acked
        newly = self._acknowledge(ack_rangeset, space, now)
        if newly is None:
            return
        is_ack_eliciting, largest_newly_acked, largest_sent_time = newly
        log_rtt = largest_acked == largest_newly_acked and is_ack_eliciting
        if log_rtt:
            self._sample_rtt(now - largest_sent_time, ack_delay, now)
        self._detect_loss(now=now, space=space)
        if self.peer_completed_address_validation:
            self._pto_count = 0
        if self._quic_logger is not None:
            self._log_metrics_updated(log_rtt=log_rtt)

    def _acknowledge(self, ack_rangeset: Any, space: Any,
                     now: float) -> tuple[bool, int, float] | None:
        """Remove the acknowledged packets (counters, congestion controller, handlers, in
        packet order); whether one was ACK-eliciting, the largest newly acknowledged and its
        send time, or None when none was newly acknowledged."""
        is_ack_eliciting = False
        largest_newly_acked = largest_sent_time = None
        sent, cc, deliveries = space.sent_packets, self._cc, _Deliveries()
        packet_numbers = list(sent)
        for r in ack_rangeset:
            start = bisect_left(packet_numbers, r.start)
            stop = bisect_left(packet_numbers, r.stop)
            for packet_number in packet_numbers[start:stop]:
                packet = sent.pop(packet_number)
                if packet.is_ack_eliciting:
                    is_ack_eliciting = True
                    space.ack_eliciting_in_flight -= 1
                if packet.in_flight:
                    cc.on_packet_acked(packet=packet, now=now)
                largest_newly_acked = packet_number
                largest_sent_time = packet.sent_time
                for handler, args in packet.delivery_handlers:
                    deliveries.add(handler, args)
        deliveries.flush()
        if largest_newly_acked is None:
            return None
        return is_ack_eliciting, largest_newly_acked, largest_sent_time

    def _sample_rtt(self, latest_rtt: float, ack_delay: float, now: float) -> None:
        """aioquic's RTT update from one sample, then the congestion controller and pacer."""
        ack_delay = min(ack_delay, self.max_ack_delay)
        self._rtt_latest = max(latest_rtt, 0.001)
        if self._rtt_latest < self._rtt_min:
            self._rtt_min = self._rtt_latest
        if self._rtt_latest > self._rtt_min + ack_delay:
            self._rtt_latest -= ack_delay
        if not self._rtt_initialized:
            self._rtt_first_sample_time = now
            self._rtt_initialized = True
            self._rtt_variance = latest_rtt / 2
            self._rtt_smoothed = latest_rtt
        else:
            self._rtt_variance = 3 / 4 * self._rtt_variance + 1 / 4 * abs(
                self._rtt_min - self._rtt_latest)
            self._rtt_smoothed = 7 / 8 * self._rtt_smoothed + 1 / 8 * self._rtt_latest
        self._cc.on_rtt_measurement(now=now, rtt=latest_rtt)
        self._pacer.update_rate(congestion_window=self._cc.congestion_window,
                                smoothed_rtt=self._rtt_smoothed)


def lean_recovery(quic: Any) -> None:
    """Make aioquic connection ``quic`` process ACKs with ``LeanPacketRecovery``."""
    if type(quic._loss) is QuicPacketRecovery:
        quic._loss.__class__ = LeanPacketRecovery
