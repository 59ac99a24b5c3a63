"""Runs of full STREAM packets (``lurcher.core.quic_run``): the same exchange through two
connection pairs, one building every packet through the steady loop: the server decrypts the
same plaintext under the same packet numbers from both, and the data arrives intact, at small
and large datagrams, with the congestion window or the peer's flow-control window cutting
runs short, and with lost datagrams sent again."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from aioquic import tls

from lurcher.core import quic_run
from lurcher.core.quic import QuicSettings
from lurcher.core.quic_crypto import LeanCryptoContext
from tests.support.quic_pair import WIDE_WINDOW, connected_pair, transfer


CASES = {
    "1200-byte datagrams": (QuicSettings(initial_mtu=1200), None, WIDE_WINDOW, 300_000, set()),
    "64 KB datagrams": (QuicSettings(initial_mtu=64_000), None, WIDE_WINDOW, 1_000_000, set()),
    "congestion window": (QuicSettings(initial_mtu=1200), None, None, 200_000, set()),
    "flow-control window": (QuicSettings(initial_mtu=1200),
                            QuicSettings(initial_mtu=1200, receive_window=50_000),
                            WIDE_WINDOW, 200_000, set()),
    "lost datagrams": (QuicSettings(initial_mtu=1200), None, WIDE_WINDOW, 300_000, {3, 10, 11, 40}),
}


@pytest.fixture
def decrypted(monkeypatch) -> dict[int, list[tuple[int, bytes]]]:
    """What every receiving context decrypted (packet number, payload), by context."""
    seen: dict[int, list[tuple[int, bytes]]] = {}
    real = LeanCryptoContext.decrypt_packet

    def recording(self, packet, encrypted_offset, expected_packet_number):
        result = real(self, packet, encrypted_offset, expected_packet_number)
        seen.setdefault(id(self), []).append((result[2], bytes(result[1])))
        return result
    monkeypatch.setattr(LeanCryptoContext, "decrypt_packet", recording)
    return seen


@pytest.fixture
def run_packets(monkeypatch) -> list[int]:
    """The number of bytes of stream data each run built packets for."""
    runs: list[int] = []
    real = quic_run._full_packets

    def counting(quic, builder, crypto, stream, built, limit):
        start = built[0]
        real(quic, builder, crypto, stream, built, limit)
        runs.append(built[0] - start)
    monkeypatch.setattr(quic_run, "_full_packets", counting)
    return runs


def _exchange(tmp_path: Path, case: tuple, decrypted: dict) -> tuple[bytes, list]:
    """The case's payload sent client to server; what arrived and what the server decrypted."""
    client, server, window, size, drop = case
    cq, sq, _, _ = connected_pair(tmp_path, client, server or client)
    if window is not None:
        cq._loss._cc.congestion_window = window
    payload = random.Random(size).randbytes(size)  # the same in both pairs
    cq.send_stream_data(cq.get_next_available_stream_id(), payload, end_stream=True)
    received, _ = transfer(cq, sq, drop)
    assert received == payload
    return received, decrypted[id(sq._cryptos[tls.Epoch.ONE_RTT].recv)]


@pytest.mark.parametrize("name", list(CASES))
def test_runs_build_the_packets_the_steady_loop_builds(tmp_path: Path, monkeypatch, name: str,
                                                       decrypted, run_packets) -> None:
    _, with_runs = _exchange(tmp_path, CASES[name], decrypted)
    assert sum(run_packets) > CASES[name][3] // 3  # much of the data went out in runs
    monkeypatch.setattr("lurcher.core.quic_steady.write_run", lambda *args: None)
    _, without = _exchange(tmp_path, CASES[name], decrypted)
    assert [number for number, _ in with_runs] == [number for number, _ in without]
    assert with_runs == without


def test_a_pending_ack_or_a_second_stream_leaves_the_packet_to_the_steady_loop(
        tmp_path: Path, decrypted, run_packets) -> None:
    """Two streams take turns packet by packet, as aioquic serves them: no run."""
    small = QuicSettings(initial_mtu=1200)
    cq, sq, _, _ = connected_pair(tmp_path, small, small)
    cq._loss._cc.congestion_window = WIDE_WINDOW
    payloads = {}
    for _ in range(2):
        stream_id = cq.get_next_available_stream_id()
        payloads[stream_id] = random.randbytes(50_000)
        cq.send_stream_data(stream_id, payloads[stream_id], end_stream=True)
    cq.datagrams_to_send(1.0)
    assert sum(run_packets) == 0


def test_a_packet_failing_mid_run_leaves_the_sender_consistent(tmp_path: Path,
                                                               monkeypatch) -> None:
    """The packets finished before the failure count as sent (pending data, highest offset
    and flow-control count agree); the failed packet's data stays pending."""
    small = QuicSettings(initial_mtu=1200)
    cq, sq, _, _ = connected_pair(tmp_path, small, small)
    cq._loss._cc.congestion_window = WIDE_WINDOW
    real, calls = LeanCryptoContext.encrypt_packet, []

    def failing(self, plain_header, plain_payload, packet_number):
        calls.append(packet_number)
        if len(calls) == 10:
            raise MemoryError("planted")
        return real(self, plain_header, plain_payload, packet_number)
    monkeypatch.setattr(LeanCryptoContext, "encrypt_packet", failing)
    sent_before = cq._remote_max_data_used
    cq.send_stream_data(0, random.randbytes(50_000))
    with pytest.raises(MemoryError):
        cq.datagrams_to_send(1.0)
    sender = cq._streams[0].sender
    assert 0 < sender.highest_offset < 50_000
    assert sender._pending[0].start == sender.highest_offset
    assert cq._remote_max_data_used - sent_before == sender.highest_offset
