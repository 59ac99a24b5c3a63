"""1-RTT packets built around the stream's data (``lurcher.core.quic_builder``): large
STREAM frames are encrypted from the stream's send buffer and arrive intact, through a key
update, and a connection whose keys cannot do it (ChaCha20) or whose frames are small takes
aioquic's path and loses nothing."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

from typing import Any

import pytest
from aioquic import tls
from aioquic.quic.crypto import CryptoPair
from aioquic.quic.events import StreamDataReceived
from aioquic.quic.packet import QuicFrameType, QuicPacketType
from aioquic.quic.packet_builder import QuicPacketBuilder, QuicPacketBuilderStop

from lurcher.core.quic import QuicSettings
from lurcher.core.quic_builder import LeanPacketBuilder
from lurcher.core.quic_crypto import LeanCryptoContext
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair

ONE_RTT = QuicPacketType.ONE_RTT


@pytest.fixture
def attached(monkeypatch) -> list[int]:
    """The sizes of the stream data encrypted straight from the send buffer: attached to a
    packet of the steady loop, or a packet of a run (``lurcher.core.quic_run``), both of
    which hand ``encrypt_parts`` a view of the buffer."""
    sizes: list[int] = []
    real = LeanCryptoContext.encrypt_parts

    def counting(self, plain_header, parts, packet_number):
        packet = real(self, plain_header, parts, packet_number)
        if packet is not None:
            sizes.append(sum(len(part) for part in parts if isinstance(part, memoryview)))
        return packet
    monkeypatch.setattr(LeanCryptoContext, "encrypt_parts", counting)
    return sizes


def _send(cq, sq, payload: bytes, now: float = 1.0) -> bytes:
    """Send ``payload`` on a new client stream; the bytes the server received on it."""
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    stream_id = cq.get_next_available_stream_id()
    cq.send_stream_data(stream_id, payload, end_stream=True)
    received = bytearray()
    for step in range(200):
        for data, _ in cq.datagrams_to_send(now):
            sq.receive_datagram(bytes(data), CLIENT_ADDR, now)
        now += 0.03
        for data, _ in sq.datagrams_to_send(now):
            cq.receive_datagram(bytes(data), SERVER_ADDR, now)
        while (event := sq.next_event()) is not None:
            if isinstance(event, StreamDataReceived) and event.stream_id == stream_id:
                received += event.data
        if len(received) >= len(payload):
            break
    return bytes(received)


def test_large_frames_are_encrypted_from_the_stream_buffer_and_arrive_intact(
        tmp_path: Path, attached: list[int]) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    payload = os.urandom(1 << 20)
    assert _send(cq, sq, payload) == payload
    assert len(attached) >= 16 and sum(attached) == len(payload)


def test_a_key_update_between_requests_keeps_the_data_intact(tmp_path: Path,
                                                              attached: list[int]) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    first, second = os.urandom(300_000), os.urandom(300_000)
    assert _send(cq, sq, first) == first
    phase = cq._cryptos[tls.Epoch.ONE_RTT].send.key_phase
    cq.request_key_update()
    before = len(attached)
    assert _send(cq, sq, second, now=5.0) == second
    assert cq._cryptos[tls.Epoch.ONE_RTT].send.key_phase != phase
    assert len(attached) > before  # the new keys take the lean path too


def test_chacha20_keys_take_aioquics_path_and_lose_nothing(tmp_path: Path,
                                                           attached: list[int]) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big,
                                  cipher_suites=[tls.CipherSuite.CHACHA20_POLY1305_SHA256])
    assert cq.tls.key_schedule.cipher_suite == tls.CipherSuite.CHACHA20_POLY1305_SHA256
    payload = os.urandom(500_000)
    assert _send(cq, sq, payload) == payload
    assert attached == []  # can_attach refuses: the suite has no encrypt_parts path


def test_small_datagrams_are_built_as_aioquic_builds_them(tmp_path: Path,
                                                          attached: list[int]) -> None:
    small = QuicSettings(initial_mtu=1200)
    cq, sq, _, _ = connected_pair(tmp_path, small, small)
    payload = os.urandom(200_000)
    assert _send(cq, sq, payload) == payload
    assert attached == []


def _build(builder_class: type, one_rtt: Any, initial: Any, script: list[tuple]) -> tuple:
    """Run ``script`` (packets: packet type and frame payload sizes, 0 for a PING) through
    a new builder of ``builder_class``; its datagrams and what it recorded per packet."""
    builder = builder_class(host_cid=b"H" * 8, peer_cid=b"P" * 8, version=0x00000001,
                            is_client=True, max_datagram_size=1200, packet_number=40,
                            spin_bit=True)
    builder.max_flight_bytes = 6000
    for packet_type, frames in script:
        try:
            builder.start_packet(packet_type, one_rtt if packet_type is ONE_RTT else initial)
        except QuicPacketBuilderStop:
            continue  # no room left in the flight
        for size in frames:
            try:
                _write_frame(builder, packet_type, size)
            except QuicPacketBuilderStop:
                pass  # the frame does not fit: the packet goes on without it
    datagrams, packets = builder.flush()
    return ([bytes(d) for d in datagrams],
            [(p.packet_number, p.sent_bytes, p.in_flight, p.is_ack_eliciting, p.epoch,
              p.delivery_handlers) for p in packets],
            builder._flight_bytes, builder._total_bytes)


def _write_frame(builder: Any, packet_type: QuicPacketType, size: int) -> None:
    """A PING (``size`` 0), else a STREAM (1-RTT) or CRYPTO frame of ``size`` bytes."""
    if size == 0:
        builder.start_frame(QuicFrameType.PING)
        return
    if packet_type is ONE_RTT:  # a STREAM frame with its length, as lurcher sends them
        buf = builder.start_frame(QuicFrameType.STREAM_BASE | 2, capacity=size + 4,
                                  handler=print, handler_args=(size,))
        buf.push_uint_var(4)
    else:
        buf = builder.start_frame(QuicFrameType.CRYPTO, capacity=size + 4)
        buf.push_uint_var(0)
    buf.push_uint_var(size)
    buf.push_bytes(bytes([size % 251]) * size)


def test_one_rtt_packets_are_byte_for_byte_aioquics(tmp_path: Path) -> None:
    """The lean start and end of 1-RTT packets against aioquic's builder, same keys and
    script: full and short packets, one too short to sample (padded by aioquic's path), one
    behind an INITIAL packet in a datagram, a STREAM frame that does not fit, and a flight
    limit that stops the script."""
    cq, _, _, _ = connected_pair(tmp_path, QuicSettings(initial_mtu=1200),
                                 QuicSettings(initial_mtu=1200))
    one_rtt = cq._cryptos[tls.Epoch.ONE_RTT]
    initial = CryptoPair()
    initial.setup_initial(cid=b"C" * 8, is_client=True, version=0x00000001)
    script = [(ONE_RTT, [1100]), (ONE_RTT, [300, 0]), (ONE_RTT, [0]), (ONE_RTT, [1, 1]),
              (QuicPacketType.INITIAL, [200]), (ONE_RTT, [600]), (ONE_RTT, [1150]),
              (ONE_RTT, [1160, 20]), (ONE_RTT, [1150]), (ONE_RTT, [1150]), (ONE_RTT, [1150])]
    lean = _build(LeanPacketBuilder, one_rtt, initial, script)
    plain = _build(QuicPacketBuilder, one_rtt, initial, script)
    assert lean == plain
    assert len(lean[0]) >= 6 and lean[1][-1][0] < 40 + len(script)  # the flight limit hit


# sha256 of aioquic 1.7.2's builder methods that LeanPacketBuilder's 1-RTT steps mirror
MIRRORED_METHODS = {
    "start_packet": "63a59deba3617ddcca6a1f302fc51b93ec44f782a164b994a7b8a00407c34572",
    "_end_packet": "585948d0382505b32a82180a9b3a42dcb18d6773ef181264af6c99f09a58cd2f",
    "_flush_current_datagram": "e310004f68f56c55536920ae183639ab2e88ddeba6ab9fa19f9ae3bfea0d7558",
    "start_frame": "53af20167bc2f0e0efb99b3d61c1bc03054a6a5484a9ea1135a68085f5d6a61f",
}


@pytest.mark.parametrize("name", sorted(MIRRORED_METHODS))
def test_the_builder_methods_it_mirrors_are_the_pinned_ones(name: str) -> None:
    source = inspect.getsource(getattr(QuicPacketBuilder, name))
    assert hashlib.sha256(source.encode()).hexdigest() == MIRRORED_METHODS[name], (
        f"aioquic's QuicPacketBuilder.{name} changed: re-check lurcher/core/quic_builder.py")
