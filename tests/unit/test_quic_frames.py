"""Long STREAM frames and delayed ACKs on aioquic (issue 18): the private aioquic code that
``lurcher.core.quic_frames`` and ``lurcher.core.quic`` rely on is still the pinned one, and a
real pair of aioquic connections joined in memory carries 64 KB datagrams intact."""

from __future__ import annotations

import inspect
from importlib.metadata import version
from pathlib import Path

from aioquic import tls
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived

from lurcher.core.quic import ACK_DELAY_S, QuicSettings
from lurcher.core.quic_frames import AIOQUIC_VERSION, LongFrameQuicConnection
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair, exchange


def test_aioquic_is_the_version_the_override_was_written_for() -> None:
    assert version("aioquic") == AIOQUIC_VERSION, (
        "aioquic changed: re-check lurcher/core/quic_frames.py against its "
        "QuicConnection._write_stream_frame, then update AIOQUIC_VERSION and the pin")


def test_the_overridden_method_keeps_its_signature_and_its_two_byte_length() -> None:
    ours = inspect.signature(LongFrameQuicConnection._write_stream_frame)
    theirs = inspect.signature(QuicConnection._write_stream_frame)
    assert list(theirs.parameters) == list(ours.parameters) == [
        "self", "builder", "space", "stream", "max_offset"]
    source = inspect.getsource(QuicConnection._write_stream_frame)
    assert "push_uint16(len(frame.data) | 0x4000)" in source  # what the override replaces


def test_the_replaced_protocol_transmit_is_still_the_one_it_copies() -> None:
    source = inspect.getsource(QuicConnectionProtocol.transmit)
    for step in ("self._transmit_task = None", "self._quic.datagrams_to_send(now=self._loop.time())",
                 "timer_at = self._quic.get_timer()", "self._timer_at != timer_at",
                 "self._loop.call_at(timer_at, self._handle_timer)", "self._timer_at = timer_at"):
        assert step in source, f"aioquic's transmit changed: re-check TunedQuicProtocol ({step})"


def test_the_private_state_the_tuning_uses_is_there(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, QuicSettings(), QuicSettings())
    for quic in (cq, sq):
        assert type(quic) is LongFrameQuicConnection
        assert quic._ack_delay == ACK_DELAY_S
        assert hasattr(quic._spaces[tls.Epoch.ONE_RTT], "ack_at")
        assert quic._loss._cc.congestion_window > 0 and quic._handshake_complete


def test_a_megabyte_crosses_in_64k_datagrams_intact(tmp_path: Path) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    payload = bytes(range(256)) * 4096
    cq.send_stream_data(cq.get_next_available_stream_id(), payload, end_stream=True)
    sizes = []
    received = bytearray()
    for _ in range(20):
        for data, _ in cq.datagrams_to_send(1.0):
            sizes.append(len(data))
            sq.receive_datagram(data, CLIENT_ADDR, 1.0)
        for data, _ in sq.datagrams_to_send(1.1):
            cq.receive_datagram(data, SERVER_ADDR, 1.1)
        event = sq.next_event()
        while event is not None:
            if isinstance(event, StreamDataReceived):
                received += event.data
            event = sq.next_event()
    assert max(sizes) == 64_000 > 16_383
    assert bytes(received) == payload


def test_an_ack_waits_for_its_delay_or_rides_on_stream_data(tmp_path: Path) -> None:
    cq, sq, _, st = connected_pair(tmp_path, QuicSettings(), QuicSettings())
    exchange(cq, sq, 1.0)  # the handshake's ACKs are due by now
    exchange(cq, sq, 1.0)
    now = 2.0
    stream_id = cq.get_next_available_stream_id()
    cq.send_stream_data(stream_id, b"request", end_stream=True)
    for data, _ in cq.datagrams_to_send(now):
        sq.receive_datagram(data, CLIENT_ADDR, now)
    space = sq._spaces[tls.Epoch.ONE_RTT]
    assert space.ack_at == now + ACK_DELAY_S
    assert sq.datagrams_to_send(now) == []  # no ACK-only packet before the delay
    sq.send_stream_data(stream_id, b"reply", end_stream=True)
    st.loop.now = now
    st.ack_with_data()
    assert len(sq.datagrams_to_send(now)) == 1 and space.ack_at is None  # one packet, ACK in it
    exchange(cq, sq, now)


def test_the_initial_window_counts_datagrams_of_the_size_used_after_the_handshake(
        tmp_path: Path) -> None:
    cq, _, _, _ = connected_pair(tmp_path, QuicSettings(initial_mtu=64_000), QuicSettings())
    assert cq._loss._cc.congestion_window >= 10 * 64_000
    capped, _, _, _ = connected_pair(tmp_path, QuicSettings(send_window=100_000), QuicSettings())
    assert capped._loss._cc.congestion_window <= 100_000
