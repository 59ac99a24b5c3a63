"""ACK processing with a stream's consecutive deliveries joined
(``lurcher.core.quic_recovery``): it mirrors the pinned aioquic method, every connection
uses it, a transfer with losses ends in the state aioquic's method leaves, and other
handlers are still called in packet order."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

from aioquic import tls
from aioquic.quic.packet_builder import QuicDeliveryState
from aioquic.quic.recovery import QuicPacketRecovery
from aioquic.quic.stream import QuicStreamSender

from lurcher.core.quic import QuicSettings
from lurcher.core.quic_recovery import LeanPacketRecovery, _Deliveries
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair

# sha256 of aioquic 1.7.2's QuicPacketRecovery.on_ack_received, the method this mirrors
MIRRORED_METHOD = "1a7c6934790843330fe5235642d5a36ddc4e72108f168b005eca87a63f5f8ab3"
SMALL = QuicSettings(initial_mtu=1200)
ACKED = QuicDeliveryState.ACKED


def test_the_method_it_mirrors_is_the_pinned_one() -> None:
    source = inspect.getsource(QuicPacketRecovery.on_ack_received)
    assert hashlib.sha256(source.encode()).hexdigest() == MIRRORED_METHOD, (
        "aioquic's on_ack_received changed: re-check lurcher/core/quic_recovery.py")


def test_both_ends_of_a_connection_use_it(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    assert type(cq._loss) is LeanPacketRecovery and type(sq._loss) is LeanPacketRecovery


def _transfer_with_losses(cq, sq, payloads: list[bytes]) -> list[bytes]:
    """Each payload on its own stream, every 9th client datagram of the first rounds
    dropped (so ACKs carry gaps and data is sent again); the bytes that arrived."""
    arrived = {}
    stream_ids = []
    for payload in payloads:
        stream_ids.append(cq.get_next_available_stream_id())
        cq.send_stream_data(stream_ids[-1], payload, end_stream=True)
    now, sent = 1.0, 0
    for round_ in range(400):
        for data, _ in cq.datagrams_to_send(now):
            sent += 1
            if round_ < 20 and sent % 9 == 0:
                continue
            sq.receive_datagram(bytes(data), CLIENT_ADDR, now)
        while (event := sq.next_event()) is not None:
            if hasattr(event, "data"):
                arrived[event.stream_id] = arrived.get(event.stream_id, b"") + event.data
        now += 0.02
        for data, _ in sq.datagrams_to_send(now):
            cq.receive_datagram(bytes(data), SERVER_ADDR, now)
        while cq.next_event() is not None:
            pass
        if all(len(arrived.get(s, b"")) == len(p) for s, p in zip(stream_ids, payloads)):
            now += 0.05  # the last ACK of the client's data comes back
            for data, _ in sq.datagrams_to_send(now):
                cq.receive_datagram(bytes(data), SERVER_ADDR, now)
            break
    return [arrived.get(s, b"") for s in stream_ids]


def _sender_state(cq) -> tuple:
    loss = cq._loss
    streams = {sid: (s.sender._buffer_start, list(s.sender._acked), s.sender._acked_fin,
                     s.sender.is_finished) for sid, s in cq._streams.items()}
    space = cq._spaces[tls.Epoch.ONE_RTT]
    return (streams, loss._cc.congestion_window, loss._cc.bytes_in_flight, loss._rtt_smoothed,
            loss._rtt_variance, loss._pto_count, sorted(space.sent_packets),
            space.ack_eliciting_in_flight, space.largest_acked_packet)


def test_a_transfer_with_losses_ends_as_aioquics_method_leaves_it(tmp_path: Path) -> None:
    payloads = [os.urandom(n) for n in (150_000, 1, 40_000, 9_000)]
    lean = connected_pair(tmp_path, SMALL, SMALL)
    plain = connected_pair(tmp_path, SMALL, SMALL)
    plain[0]._loss.__class__ = QuicPacketRecovery
    assert _transfer_with_losses(lean[0], lean[1], payloads) == payloads
    assert _transfer_with_losses(plain[0], plain[1], payloads) == payloads
    assert _sender_state(lean[0]) == _sender_state(plain[0])


def _sender_with(data: bytes) -> QuicStreamSender:
    sender = QuicStreamSender(stream_id=0, writable=True)
    sender.write(data, end_stream=True)
    while sender.get_frame(1000) is not None:
        pass
    return sender


def test_other_handlers_run_in_packet_order_between_joined_deliveries() -> None:
    """A run of a stream's ranges, another handler, the rest of the run: the other handler
    sees the stream's first ranges acknowledged and not the later ones; the stream ends
    with every byte and the FIN acknowledged."""
    sender = _sender_with(os.urandom(3000))
    seen = []
    deliveries = _Deliveries()
    deliveries.add(sender.on_data_delivery, (0, 1000, False))
    deliveries.add(sender.on_data_delivery, (1000, 2000, False))
    deliveries.add(lambda state: seen.append((state, sender._buffer_start)), ())
    deliveries.add(sender.on_data_delivery, (2000, 3000, True))
    deliveries.flush()
    assert seen == [(ACKED, 2000)]
    assert sender._buffer_start == 3000 and sender._acked_fin and sender.is_finished


def test_ranges_out_of_order_or_of_two_streams_are_not_joined() -> None:
    """Ranges that do not follow each other, and another stream's range in between, end in
    the state separate calls leave."""
    data = os.urandom(4000)
    joined, separate = (_sender_with(data), _sender_with(data)), (_sender_with(data),
                                                                   _sender_with(data))
    steps = [(0, 2000, 3000, False), (0, 0, 1000, False), (1, 0, 1000, False),
             (0, 3000, 4000, True), (0, 1000, 2000, False), (1, 1000, 4000, True)]
    deliveries = _Deliveries()
    for which, start, stop, fin in steps:
        deliveries.add(joined[which].on_data_delivery, (start, stop, fin))
        separate[which].on_data_delivery(ACKED, start, stop, fin)
    deliveries.flush()
    for a, b in zip(joined, separate):
        assert (a._buffer_start, list(a._acked), a.is_finished) == (
            b._buffer_start, list(b._acked), b.is_finished)
    assert joined[0].is_finished and joined[1].is_finished
