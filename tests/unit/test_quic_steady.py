"""The steady 1-RTT packet loop (``lurcher.core.quic_steady``): it mirrors the pinned aioquic
loop, is taken only when none of the frames it leaves out is pending, carries streams intact
and serves several streams in turn; a pending PING or probe goes through aioquic's loop."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

import pytest
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived

from lurcher.core import quic_steady
from lurcher.core.quic import QuicSettings
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair

# sha256 of aioquic 1.7.2's QuicConnection._write_application, the loop write_steady mirrors
MIRRORED_LOOP = "c37bf64378f72b2f93f2f1b01f67bd8c5cb9c042ab908ca7fda80f2ae92cdc0b"


@pytest.fixture
def steady_calls(monkeypatch) -> list[bool]:
    """One entry per ``_write_application``: whether the steady loop ran."""
    calls: list[bool] = []
    real = quic_steady.steady

    def spying(quic, path) -> bool:
        calls.append(real(quic, path))
        return calls[-1]
    monkeypatch.setattr("lurcher.core.quic_frames.steady", spying)
    return calls


def _pump(cq, sq, now: float, rounds: int = 300,
          got: dict[int, bytearray] | None = None) -> dict[int, bytes]:
    """Exchange datagrams until quiet; the bytes the server got, by stream (added to
    ``got``)."""
    got = {} if got is None else got
    for _ in range(rounds):
        moved = 0
        for data, _ in cq.datagrams_to_send(now):
            sq.receive_datagram(bytes(data), CLIENT_ADDR, now)
            moved += 1
        now += 0.03
        for data, _ in sq.datagrams_to_send(now):
            cq.receive_datagram(bytes(data), SERVER_ADDR, now)
        while (event := sq.next_event()) is not None:
            if isinstance(event, StreamDataReceived):
                got.setdefault(event.stream_id, bytearray()).extend(event.data)
        if not moved:
            break
    return {k: bytes(v) for k, v in got.items()}


def test_the_loop_it_mirrors_is_the_pinned_one() -> None:
    source = inspect.getsource(QuicConnection._write_application)
    assert hashlib.sha256(source.encode()).hexdigest() == MIRRORED_LOOP, (
        "aioquic's _write_application changed: re-check lurcher/core/quic_steady.py")


def test_several_streams_arrive_intact_and_take_turns(tmp_path: Path, steady_calls) -> None:
    small = QuicSettings(initial_mtu=1200)
    cq, sq, _, _ = connected_pair(tmp_path, small, small)
    cq._loss._cc.congestion_window = 64 * 1200  # a window smaller than the data: turns matter
    payloads = {}
    for _ in range(3):
        stream_id = cq.get_next_available_stream_id()
        payloads[stream_id] = os.urandom(150_000)
        cq.send_stream_data(stream_id, payloads[stream_id], end_stream=True)
    got: dict[int, bytearray] = {}
    _pump(cq, sq, 1.0, rounds=1, got=got)  # one window, smaller than the data
    assert set(got) == set(payloads) and all(got.values())  # every stream had its turn
    assert _pump(cq, sq, 1.1, got=got) == payloads
    assert any(steady_calls)


def test_whole_streams_cross_on_the_steady_loop(tmp_path: Path, steady_calls) -> None:
    small = QuicSettings(initial_mtu=1200)
    cq, sq, _, _ = connected_pair(tmp_path, small, small)
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    payloads = {}
    for _ in range(3):
        stream_id = cq.get_next_available_stream_id()
        payloads[stream_id] = os.urandom(100_000)
        cq.send_stream_data(stream_id, payloads[stream_id], end_stream=True)
    assert _pump(cq, sq, 1.0) == payloads
    assert steady_calls and all(steady_calls[-3:])


@pytest.mark.parametrize("pending", ["ping", "probe"])
def test_a_pending_ping_or_probe_takes_aioquics_loop(tmp_path: Path, steady_calls,
                                                      pending: str) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, QuicSettings(), QuicSettings())
    if pending == "ping":
        cq.send_ping(7)
    else:
        cq._probe_pending = True
    payload = os.urandom(50_000)
    stream_id = cq.get_next_available_stream_id()
    cq.send_stream_data(stream_id, payload, end_stream=True)
    steady_calls.clear()
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    got = _pump(cq, sq, 1.0)
    assert steady_calls[0] is False  # the PING or probe went out through aioquic's loop
    assert got[stream_id] == payload
    assert not cq._ping_pending and not cq._probe_pending


def _limit_trace(cq, sq) -> list[tuple]:
    """Many small request streams (more than the server lets be open at once), each answered
    when it ends, then one request larger than the server's receive window: after each of the
    server's transmits, the flow-control limits it has sent (MAX_DATA, MAX_STREAMS, each
    stream's MAX_STREAM_DATA) and the streams it still holds."""
    pending = [os.urandom(3_000) for _ in range(12)] + [os.urandom(300_000)]
    trace, now, open_ = [], 1.0, 0
    for _ in range(600):
        while pending and open_ < 3:  # the client's opens stay within MAX_STREAMS
            stream_id = cq.get_next_available_stream_id()
            cq.send_stream_data(stream_id, pending.pop(0), end_stream=True)
            open_ += 1
        for data, _ in cq.datagrams_to_send(now):
            sq.receive_datagram(bytes(data), CLIENT_ADDR, now)
        while (event := sq.next_event()) is not None:
            if isinstance(event, StreamDataReceived) and event.end_stream:
                sq.send_stream_data(event.stream_id, b"ok", end_stream=True)
        now += 0.03
        for data, _ in sq.datagrams_to_send(now):
            cq.receive_datagram(bytes(data), SERVER_ADDR, now)
        while (event := cq.next_event()) is not None:
            if isinstance(event, StreamDataReceived) and event.end_stream:
                open_ -= 1
        trace.append((sq._local_max_data.sent, sq._local_max_streams_bidi.sent,
                      tuple(sorted((sid, s.max_stream_data_local_sent)
                                   for sid, s in sq._streams.items()))))
        if not pending and not open_:
            return trace
    raise AssertionError("the requests did not all get answered")


def test_flow_control_limits_are_raised_as_aioquics_loop_raises_them(
        tmp_path: Path, steady_calls, monkeypatch) -> None:
    """The same exchange through two pairs, the second building with aioquic's loop only:
    the server raises MAX_DATA, MAX_STREAMS and MAX_STREAM_DATA at the same transmits."""
    server = QuicSettings(initial_mtu=1200, receive_window=64 * 1024,
                          max_concurrent_bidi_streams=4)
    client = QuicSettings(initial_mtu=1200)
    steady_trace = _limit_trace(*connected_pair(tmp_path, client, server)[:2])
    assert steady_calls.count(True) > 20
    monkeypatch.setattr("lurcher.core.quic_frames.steady", lambda quic, path: False)
    plain_trace = _limit_trace(*connected_pair(tmp_path, client, server)[:2])
    assert steady_trace == plain_trace
    max_data, max_streams, _ = steady_trace[-1]
    assert max_data > 64 * 1024 and max_streams > 4  # raised while the steady loop ran
