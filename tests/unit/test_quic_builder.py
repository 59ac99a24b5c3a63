"""1-RTT packets built around the stream's data (``lurcher.core.quic_builder``): large
STREAM frames are encrypted from the stream's send buffer and arrive intact, through a key
update, and a connection whose keys cannot do it (ChaCha20) or whose frames are small takes
aioquic's path and loses nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aioquic import tls
from aioquic.quic.events import StreamDataReceived

from lurcher.core.quic import QuicSettings
from lurcher.core.quic_builder import LeanPacketBuilder
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair


@pytest.fixture
def attached(monkeypatch) -> list[int]:
    """The sizes of the stream data attached to packets (the lean path taken)."""
    sizes: list[int] = []
    real = LeanPacketBuilder.attach

    def counting(self, data) -> None:
        sizes.append(len(data))
        real(self, data)
    monkeypatch.setattr(LeanPacketBuilder, "attach", counting)
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
