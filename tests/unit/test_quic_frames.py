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

from lurcher.core.quic import ACK_DELAY_S, QuicSettings, chunk_bytes
from lurcher.core.quic_frames import AIOQUIC_VERSION, LongFrameQuicConnection
from lurcher.core.quic_send import HeldBytes
from lurcher.core.udp_offload import offload_runs
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair, exchange, transfer


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


def test_the_flow_control_methods_mirrored_by_quic_flow_are_the_pinned_ones() -> None:
    """lurcher.core.quic_flow rewrites these aioquic methods: their signatures and the steps
    it mirrors (or relies on) must still be there."""
    expected = {
        "_write_connection_limits": ["max_data.value *= 2",
                                     "limit.sent - limit.used >= limit.value - limit.sent",
                                     "handler=self._on_connection_limit_delivery"],
        "_write_stream_limits": ["stream.max_stream_data_local *= 2",
                                 "handler=self._on_max_stream_data_delivery"],
        "_get_or_create_stream": ["max_streams.used * 4 + stream_id % 4, stream_id + 4, 4",
                                  "max_streams.used = stream_count",
                                  "if self._stream_is_discarded(stream_id):"],
    }
    for name, steps in expected.items():
        ours = inspect.signature(getattr(LongFrameQuicConnection, name))
        theirs = inspect.signature(getattr(QuicConnection, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        source = inspect.getsource(getattr(QuicConnection, name))
        for step in steps:
            assert step in source, f"aioquic's {name} changed: re-check quic_flow ({step})"


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
            sq.receive_datagram(bytes(data), CLIENT_ADDR, 1.0)
        for data, _ in sq.datagrams_to_send(1.1):
            cq.receive_datagram(bytes(data), SERVER_ADDR, 1.1)
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
        sq.receive_datagram(bytes(data), CLIENT_ADDR, now)
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


def test_a_reply_handed_over_whole_is_held_without_a_copy_and_resent_from_it(
        tmp_path: Path) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    stream_id = cq.get_next_available_stream_id()
    cq.send_stream_data(stream_id, b"request", end_stream=True)
    exchange(cq, sq, 1.0)
    reply = bytearray(bytes(range(256)) * 4096)
    expected = bytes(reply)
    sq.send_stream_data(stream_id, reply, end_stream=True)
    held = sq._streams[stream_id].sender._buffer
    assert isinstance(held, HeldBytes) and held.views[0].obj is reply  # no copy in the stream
    received, sent_by_server = transfer(sq, cq, drop={2})  # the second reply datagram lost
    assert bytes(received) == expected
    assert sum(sent_by_server) > len(expected) + 60_000  # the lost datagram went again
    assert max(sent_by_server) == 64_000 and len(held) == 0  # all acknowledged and dropped


def test_held_bytes_fall_back_to_a_bytearray_on_a_second_write() -> None:
    held = HeldBytes()
    held += b"head"
    assert isinstance(held, HeldBytes) and bytes(held[1:3]) == b"ea"
    del held[:2]
    assert bytes(held[:]) == b"ad"
    joined = held
    joined += b"-tail"
    assert isinstance(joined, bytearray) and joined == bytearray(b"ad-tail")


def test_transmit_chunks_are_what_one_offloaded_send_carries() -> None:
    """A chunk is handed out as soon as it is built; a bigger one would save no system call
    and hold its first datagram back."""
    for size in (1_200, 1_500, 8_192, 16_000, 32_000, 64_000, 65_507):
        chunk = chunk_bytes(size)
        assert chunk % size == 0 and chunk // size >= 1
        runs = list(offload_runs([bytes(size)] * (chunk // size)))
        assert len(runs) == 1, size  # one send
        assert len(list(offload_runs([bytes(size)] * (chunk // size + 1)))) == 2, size
    assert chunk_bytes(64_000) == 64_000 and chunk_bytes(1_200) == 54 * 1_200
